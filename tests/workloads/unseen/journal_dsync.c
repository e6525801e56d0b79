/* Written after the thresholds were frozen (set 2). expect: diagnose.storage-sync
 * A journal opened with O_DSYNC: every 256-byte append waits for the device
 * (no explicit fsync call), in the directory argv[2]. */
#include "../common.h"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static int append_record(int fd, const char *rec, size_t n) {
    return write(fd, rec, n) == (ssize_t)n ? 0 : -1;
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    char path[4096];
    snprintf(path, sizeof path, "%s/journal.bin", argc > 2 ? argv[2] : ".");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DSYNC, 0600);
    if (fd < 0) return 1;
    char rec[256];
    memset(rec, 'j', sizeof rec);
    while (now_s() < end)
        if (append_record(fd, rec, sizeof rec)) break;
    close(fd);
    unlink(path);
    return 0;
}
