/* A reader waiting on a slow writer: the child writes 64 bytes every 5 ms
 * (it sleeps between writes), the parent reads and sums them. */
#include "common.h"
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static long consume(int fd) {
    char buf[64];
    long sum = 0, n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (long i = 0; i < n; i++) sum += buf[i];
    return sum;
}

__attribute__((noinline)) static void produce(int fd, double end) {
    char buf[64];
    memset(buf, 7, sizeof buf);
    struct timespec gap = {0, 5000000};
    while (now_s() < end) {
        nanosleep(&gap, 0);
        if (write(fd, buf, sizeof buf) != sizeof buf) break;
    }
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    int p[2];
    if (pipe(p)) return 1;
    pid_t w = fork();
    if (w == 0) {
        close(p[0]);
        produce(p[1], end);
        _exit(0);
    }
    close(p[1]);
    long s = consume(p[0]);
    waitpid(w, 0, 0);
    return s < 0;
}
