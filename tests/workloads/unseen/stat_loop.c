/* Written after the thresholds were frozen (set 1). expect: diagnose.kernel-bound
 * stat() the same path in a
 * loop: all system calls, no I/O. */
#include "../common.h"
#include <sys/stat.h>

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    struct stat st;
    unsigned long n = 0;
    while (now_s() < end)
        for (int i = 0; i < 100; i++) n += stat("/usr/bin", &st) == 0;
    return n == 0;
}
