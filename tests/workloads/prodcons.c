/* A producer thread computes items in produce (CPU-bound); three consumer
 * threads wait on a condition variable for them and do little each: the
 * process is mostly blocked, its one busy thread's hot spot is produce. */
#include "common.h"
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static unsigned long queue[64];
static int head, tail, done;
static double end;
volatile unsigned long sink;

__attribute__((noinline)) static unsigned long produce(unsigned long x) {
    for (int i = 0; i < 300000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static void *producer(void *arg) {
    unsigned long x = (unsigned long)arg + 1;
    while (now_s() < end) {
        x = produce(x);
        pthread_mutex_lock(&lock);
        if (head - tail < 64) queue[head++ & 63] = x;
        pthread_cond_signal(&ready);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_broadcast(&ready);
    pthread_mutex_unlock(&lock);
    return 0;
}

static void *consumer(void *arg) {
    unsigned long sum = (unsigned long)arg;
    pthread_mutex_lock(&lock);
    while (!done) {
        while (tail == head && !done) pthread_cond_wait(&ready, &lock);
        while (tail < head) sum += queue[tail++ & 63];
    }
    pthread_mutex_unlock(&lock);
    sink = sum;
    return 0;
}

int main(int argc, char **argv) {
    end = now_s() + run_for(argc, argv);
    pthread_t p, c[3];
    for (long i = 0; i < 3; i++) pthread_create(&c[i], 0, consumer, (void *)i);
    pthread_create(&p, 0, producer, 0);
    pthread_join(p, 0);
    for (int i = 0; i < 3; i++) pthread_join(c[i], 0);
    return 0;
}
