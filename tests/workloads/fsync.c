/* 4 KiB write + fsync, again and again, in the directory argv[2]. */
#include "common.h"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void append_record(int fd, const char *buf) {
    if (write(fd, buf, 4096) != 4096) exit(1);
    fsync(fd);
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync.dat", argc > 2 ? argv[2] : ".");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) return 1;
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    while (now_s() < end) append_record(fd, buf);
    close(fd);
    unlink(path);
    return 0;
}
