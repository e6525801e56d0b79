/* Written after the thresholds were frozen (set 2). expect: diagnose.blocking
 * A consumer reading records from a socketpair whose producer (a child
 * process) computes 3 ms per record: the consumer waits on its socket. */
#include "../common.h"
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void produce(int fd, double end) {
    char rec[64] = {0};
    while (now_s() < end) {
        struct timespec t = {0, 3000000};
        nanosleep(&t, NULL);
        if (write(fd, rec, sizeof rec) != sizeof rec) break;
    }
}

__attribute__((noinline)) static long consume_records(int fd) {
    char rec[64];
    long n = 0;
    while (read(fd, rec, sizeof rec) > 0) n++;
    return n;
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    pid_t p = fork();
    if (p == 0) { close(sv[0]); produce(sv[1], end); _exit(0); }
    close(sv[1]);
    long n = consume_records(sv[0]);
    waitpid(p, NULL, 0);
    return n < 0;
}
