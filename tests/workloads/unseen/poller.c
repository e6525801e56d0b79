/* Written after the thresholds were frozen (set 2). expect: diagnose.sleep-bound
 * A status poller: checks a flag, then poll()s nothing with a 2 ms timeout. */
#include "../common.h"
#include <poll.h>

static volatile int ready;

__attribute__((noinline)) static void wait_for_status(void) {
    poll(NULL, 0, 2);
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    unsigned long checks = 0;
    while (now_s() < end && !ready) {
        checks++;
        wait_for_status();
    }
    return checks == 0;
}
