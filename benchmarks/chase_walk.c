/* An independent reference for `numatune probe`'s idle latency: one continuous walk round a random
 * cycle through the whole buffer (default 256 MiB), timed one full cycle at a time.
 *
 * Written separately from numatune's helper (numatune/measure/chase.c): its own generator (xorshift64*),
 * its own cycle (Sattolo's algorithm inside each window, the windows visited in a random order), its own
 * timing. The walk never restarts: each timed lap begins at the pointer the last one ended on, and each lap
 * visits every cache line of the buffer once, so no lap can find its lines in the caches.
 *
 * Usage: chase_walk [MiB] [laps] [window KiB; 0 = one random cycle over the whole buffer]
 * Prints one line per lap: nanoseconds per load. Build: cc -O2 -o chase_walk chase_walk.c
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t state = 0x853c49e6748fea9bULL;

static uint64_t xorshift(void) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ULL;
}

static double ns_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* a[0..n) becomes one cycle: Sattolo's shuffle of the identity, read as i -> a[i] */
static void sattolo(size_t *a, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(xorshift() % i);
        size_t t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 256;
    int laps = argc > 2 ? atoi(argv[2]) : 5;
    size_t window = (argc > 3 ? strtoull(argv[3], NULL, 10) : 2048) << 10;
    size_t bytes = mib << 20, line = 64;
    if (window == 0 || window > bytes) window = bytes;
    if (!mib || laps < 1 || bytes % window || window % line) {
        fprintf(stderr, "chase_walk: bad size, laps or window\n");
        return 2;
    }
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) { perror("mmap"); return 1; }
    madvise(buf, bytes, MADV_HUGEPAGE);  /* as probe asks; THP "never" leaves 4 KiB pages on both sides */
    size_t per = window / line, windows = bytes / window;
    size_t *inside = malloc(per * sizeof *inside), *order = malloc(windows * sizeof *order);
    if (!inside || !order) { perror("malloc"); return 1; }
    /* the windows in the order of one random cycle from window 0; inside each, its lines likewise */
    sattolo(order, windows);
    char *first = NULL, *prev = NULL;
    size_t w = 0;
    for (size_t k = 0; k < windows; k++, w = order[w]) {
        sattolo(inside, per);
        size_t l = 0;
        for (size_t i = 0; i < per; i++, l = inside[l]) {
            char *slot = buf + w * window + l * line;
            if (prev) *(char **)prev = slot; else first = slot;
            prev = slot;
        }
    }
    *(char **)prev = first;
    size_t loads = bytes / line;
    char **p = (char **)first;
    for (size_t i = 0; i < loads; i++) p = (char **)*p;  /* one untimed lap: page faults and warm-up */
    for (int r = 0; r < laps; r++) {
        double t0 = ns_now();
        for (size_t i = 0; i < loads; i++) p = (char **)*p;
        double t1 = ns_now();
        printf("%.2f\n", (t1 - t0) / (double)loads);
    }
    return p == NULL;  /* keeps the loads */
}
