/* Unbuffered 16-byte write() calls to a file in the directory argv[2]. */
#include "common.h"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    char path[4096];
    snprintf(path, sizeof path, "%s/small.dat", argc > 2 ? argv[2] : ".");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) return 1;
    const char rec[16] = "0123456789abcde";
    unsigned long n = 0;
    while (now_s() < end) {
        for (int i = 0; i < 256; i++) {
            if (write(fd, rec, sizeof rec) != sizeof rec) return 1;
        }
        if (++n % 4096 == 0) ftruncate(fd, 0); /* keep the file small */
    }
    close(fd);
    unlink(path);
    return 0;
}
