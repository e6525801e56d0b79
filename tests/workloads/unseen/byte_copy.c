/* Written after the thresholds were frozen (set 2). expect: diagnose.small-io
 * Copies a file one byte per read(2) and write(2), in the directory argv[2]. */
#include "../common.h"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    const char *dir = argc > 2 ? argv[2] : ".";
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/copy-src", dir);
    snprintf(dst, sizeof dst, "%s/copy-dst", dir);
    int s = open(src, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (s < 0) return 1;
    char block[4096];
    for (int i = 0; i < (int)sizeof block; i++) block[i] = (char)('a' + i % 26);
    for (int i = 0; i < 64; i++) if (write(s, block, sizeof block) < 0) return 1;
    int d = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (d < 0) return 1;
    char c;
    while (now_s() < end) {
        lseek(s, 0, SEEK_SET);
        lseek(d, 0, SEEK_SET);
        for (int i = 0; i < 4096 && read(s, &c, 1) == 1; i++)
            if (write(d, &c, 1) != 1) return 1;
    }
    close(s); close(d);
    unlink(src); unlink(dst);
    return 0;
}
