/* Written after the thresholds were frozen (set 2). expect: diagnose.user-lock
 * A job queue: 4 producers push into one list under one mutex and do
 * their bookkeeping while holding it; a consumer drains it. */
#include "../common.h"
#include <pthread.h>
#include <stdlib.h>

struct job { struct job *next; unsigned long payload[8]; };
static struct job *head;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static double end;

__attribute__((noinline)) static void enqueue_job(unsigned long v) {
    struct job *j = malloc(sizeof *j);
    pthread_mutex_lock(&qlock);
    for (int i = 0; i < 8; i++) j->payload[i] = v * 2654435761u + (unsigned long)i;
    for (volatile int spin = 0; spin < 3000; spin++) {}
    j->next = head;
    head = j;
    pthread_mutex_unlock(&qlock);
}

static void *producer(void *arg) {
    unsigned long v = (unsigned long)arg;
    while (now_s() < end) enqueue_job(v++);
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    while (now_s() < end) {
        pthread_mutex_lock(&qlock);
        struct job *all = head;
        head = NULL;
        pthread_mutex_unlock(&qlock);
        while (all) { struct job *n = all->next; free(all); all = n; }
    }
    return NULL;
}

int main(int argc, char **argv) {
    end = now_s() + run_for(argc, argv);
    pthread_t t[5];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, producer, (void *)(i << 32));
    pthread_create(&t[4], NULL, consumer, NULL);
    for (int i = 0; i < 5; i++) pthread_join(t[i], NULL);
    return 0;
}
