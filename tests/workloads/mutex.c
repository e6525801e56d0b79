/* Four threads take one pthread mutex around a short update. */
#include "common.h"
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared[64];
static double end;

__attribute__((noinline)) static void contended_update(int k) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 2000; i++) shared[(i + k) & 63] += i;
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    int k = (int)(long)arg;
    unsigned long local = 0;
    while (now_s() < end) {
        contended_update(k);
        for (int i = 0; i < 500; i++) local += i * k;
    }
    return (void *)local;
}

int main(int argc, char **argv) {
    end = now_s() + run_for(argc, argv);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, worker, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    return 0;
}
