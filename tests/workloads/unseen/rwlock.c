/* Written after the thresholds were frozen (set 1). expect: diagnose.user-lock
 * Three threads update a table
 * under one pthread rwlock taken for writing, with the work inside. */
#include "../common.h"
#include <pthread.h>

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static volatile double table[256];
static double end;

__attribute__((noinline)) static void update_table(int k) {
    pthread_rwlock_wrlock(&rw);
    for (int i = 0; i < 3000; i++) table[(i * 7 + k) & 255] += i * 0.5;
    pthread_rwlock_unlock(&rw);
}

static void *run(void *a) {
    while (now_s() < end) update_table((int)(long)a);
    return 0;
}

int main(int argc, char **argv) {
    end = now_s() + run_for(argc, argv);
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], 0, run, (void *)i);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    return 0;
}
