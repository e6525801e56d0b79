/* The floor for io.random's comparison (bench/random_vs_fio.sh FLOOR=1):
 * 4 KiB O_DIRECT random reads at uniform aligned offsets with as little work
 * per I/O as a program can do: no clock read, no histogram, no stats per I/O,
 * one counter per thread. psync: QD threads each pread() in a loop. io_uring:
 * one ring of QD entries, registered file and buffers, READ_FIXED, one
 * io_uring_enter per batch (submit what was reaped, wait for one).
 * JOBS (default 1) runs that many workers: psync QD x JOBS threads, io_uring
 * JOBS threads with a ring of QD each (fio numjobs).
 * Prints the IOPS over the timed seconds (after one warm-up second).
 * Build: cc -O2 -o randread randread.c -luring -lpthread
 * Usage: randread FILE psync|io_uring QD SECONDS [JOBS] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BS 4096
static int fd;
static uint64_t blocks;
static atomic_int phase; /* 0 warm-up, 1 timed, 2 stop */

static uint64_t next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

struct worker { pthread_t t; uint64_t seed, ops; };

static void *psync(void *arg) {
    struct worker *w = arg;
    void *buf;
    if (posix_memalign(&buf, BS, BS)) exit(4);
    uint64_t ops = 0;
    int p;
    while ((p = atomic_load_explicit(&phase, memory_order_relaxed)) != 2) {
        off_t off = (off_t)(next(&w->seed) % blocks) * BS;
        if (pread(fd, buf, BS, off) != BS) { perror("pread"); exit(1); }
        if (p == 1) ops++;
    }
    w->ops = ops;
    return NULL;
}

static void *uring(void *arg) {
    struct worker *w = arg;
    int qd = (int)w->ops;
    struct io_uring ring;
    if (io_uring_queue_init(qd, &ring, 0)) { fprintf(stderr, "io_uring_queue_init failed\n"); exit(4); }
    struct iovec *iov = calloc(qd, sizeof *iov);
    for (int i = 0; i < qd; i++) {
        if (posix_memalign(&iov[i].iov_base, BS, BS)) exit(4);
        iov[i].iov_len = BS;
    }
    if (io_uring_register_files(&ring, &fd, 1) || io_uring_register_buffers(&ring, iov, qd)) {
        fprintf(stderr, "registering file/buffers failed\n"); exit(4);
    }
    for (int i = 0; i < qd; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        io_uring_prep_read_fixed(sqe, 0, iov[i].iov_base, BS, (next(&w->seed) % blocks) * BS, i);
        sqe->flags |= IOSQE_FIXED_FILE;
        sqe->user_data = i;
    }
    uint64_t ops = 0;
    int p;
    while ((p = atomic_load_explicit(&phase, memory_order_relaxed)) != 2) {
        if (io_uring_submit_and_wait(&ring, 1) < 0) { fprintf(stderr, "submit failed\n"); exit(1); }
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            if (cqe->res != BS) { fprintf(stderr, "read: %d\n", cqe->res); exit(1); }
            int i = (int)cqe->user_data;
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_read_fixed(sqe, 0, iov[i].iov_base, BS, (next(&w->seed) % blocks) * BS, i);
            sqe->flags |= IOSQE_FIXED_FILE;
            sqe->user_data = i;
            n++;
        }
        io_uring_cq_advance(&ring, n);
        if (p == 1) ops += n;
    }
    w->ops = ops;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) { fprintf(stderr, "usage: randread FILE psync|io_uring QD SECONDS [JOBS]\n"); return 2; }
    int qd = atoi(argv[3]);
    double secs = atof(argv[4]);
    int jobs = argc == 6 ? atoi(argv[5]) : 1;
    int ring = strcmp(argv[2], "io_uring") == 0;
    if (qd < 1 || jobs < 1 || secs <= 0 || (!ring && strcmp(argv[2], "psync"))) { fprintf(stderr, "bad arguments\n"); return 2; }
    fd = open(argv[1], O_RDONLY | O_DIRECT);
    if (fd < 0) { perror(argv[1]); return 4; }
    struct stat st;
    fstat(fd, &st);
    blocks = (uint64_t)st.st_size / BS;
    if (!blocks) { fprintf(stderr, "%s: empty\n", argv[1]); return 2; }
    int n = ring ? jobs : qd * jobs;
    struct worker *w = calloc(n, sizeof *w);
    for (int i = 0; i < n; i++) {
        w[i].seed = 0x9E3779B97F4A7C15ULL * (i + 1) ^ (uint64_t)now();
        w[i].ops = ring ? (uint64_t)qd : 0;
        pthread_create(&w[i].t, NULL, ring ? uring : psync, &w[i]);
    }
    usleep(1000000);
    double t0 = now();
    atomic_store(&phase, 1);
    usleep((useconds_t)(secs * 1e6));
    atomic_store(&phase, 2);
    double t1 = now();
    uint64_t ops = 0;
    for (int i = 0; i < n; i++) { pthread_join(w[i].t, NULL); ops += w[i].ops; }
    printf("%.0f\n", ops / (t1 - t0));
    return 0;
}
