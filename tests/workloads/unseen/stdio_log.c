/* Written after the thresholds were frozen (set 1). expect: diagnose.storage-sync
 * A log writer: fprintf a
 * 100-byte line, fflush and fdatasync it, in the directory argv[2]. */
#include "../common.h"
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    char path[4096];
    snprintf(path, sizeof path, "%s/app.log", argc > 2 ? argv[2] : ".");
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    unsigned long n = 0;
    while (now_s() < end) {
        fprintf(f, "%12lu event=something-happened status=ok payload=0123456789abcdef0123456789abcdef\n", n++);
        fflush(f);
        fdatasync(fileno(f));
    }
    fclose(f);
    unlink(path);
    return 0;
}
