/* Written after the thresholds were frozen (set 2). expect: diagnose.kernel-bound
 * Two threads pass a token through a shared flag; each waits for its turn
 * with sched_yield() in a loop. */
#include "../common.h"
#include <pthread.h>
#include <sched.h>

static volatile int turn;
static double end;

static void *player(void *arg) {
    int me = (int)(long)arg;
    while (now_s() < end) {
        while (turn != me && now_s() < end) sched_yield();
        turn = !me;
    }
    return NULL;
}

int main(int argc, char **argv) {
    end = now_s() + run_for(argc, argv);
    pthread_t a, b;
    pthread_create(&a, NULL, player, (void *)0L);
    pthread_create(&b, NULL, player, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
