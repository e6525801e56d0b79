/* One process forks a child that exits at once, and waits for it, in a
 * loop: its time is the kernel's (fork, exit, wait), no hot spot of its own
 * and nobody else's CPU to wait for. */
#include "common.h"
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    while (now_s() < end) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (p > 0) waitpid(p, 0, 0);
    }
    return 0;
}
