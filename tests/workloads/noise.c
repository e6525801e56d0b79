/* Background noise for the diagnose tests: one CPU spinner (nice 19) and
 * one disk writer (1 MiB writes, fdatasync every 8 MiB) in directory
 * argv[1], until killed. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    pid_t spinner = fork();
    if (spinner == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setpriority(PRIO_PROCESS, 0, 19);
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/noise.dat", dir);
    static char buf[1 << 20];
    memset(buf, 'n', sizeof buf);
    for (;;) {
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        if (fd < 0) break;
        for (int i = 0; i < 64; i++) {
            if (write(fd, buf, sizeof buf) != sizeof buf) break;
            if (i % 8 == 7) fdatasync(fd);
        }
        close(fd);
    }
    kill(spinner, SIGKILL);
    return 1;
}
