/* numatune's measurement helper: a dependent-load pointer chase and a read-only bandwidth loop.
 *
 * Built on first use by numatune.measure.helper with the system C compiler and loaded with ctypes
 * (every call releases the GIL). Interpreted Python adds ~25 ns per step, more than the local /
 * remote / CXL differences it would have to resolve; a compiled loop measures the memory.
 * Unprivileged: no MSR writes, so hardware prefetchers stay on; the chase visits cache lines in
 * random order within each group (a 2 MiB page by default) and the groups in random order, which
 * defeats the stride and adjacent-line prefetchers while keeping TLB misses out of the figure.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define NT_HELPER_VERSION 1

int nt_version(void) { return NT_HELPER_VERSION; }

static uint64_t rng_next(uint64_t *s) {
    /* splitmix64: deterministic for a seed, good enough for a permutation */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void shuffle(size_t *a, size_t n, uint64_t *seed) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng_next(seed) % i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* Link every `line`-th slot of buf[0, bytes) into one random cycle, group by group.
 * Returns the number of slots in the cycle (0 on bad arguments or no memory). */
size_t nt_chase_init(void *buf, size_t bytes, size_t line, size_t group, uint64_t seed) {
    if (!buf || line < sizeof(void *) || group < line || group % line || bytes < group) return 0;
    size_t ngroups = bytes / group, per = group / line;
    size_t *gorder = malloc(ngroups * sizeof(size_t));
    size_t *lorder = malloc(per * sizeof(size_t));
    if (!gorder || !lorder) { free(gorder); free(lorder); return 0; }
    for (size_t g = 0; g < ngroups; g++) gorder[g] = g;
    shuffle(gorder, ngroups, &seed);
    char *base = buf;
    void **first = NULL, **prev = NULL;
    for (size_t gi = 0; gi < ngroups; gi++) {
        for (size_t l = 0; l < per; l++) lorder[l] = l;
        shuffle(lorder, per, &seed);
        char *g = base + gorder[gi] * group;
        for (size_t l = 0; l < per; l++) {
            void **slot = (void **)(g + lorder[l] * line);
            if (prev) *prev = (void *)slot; else first = slot;
            prev = slot;
        }
    }
    *prev = (void *)first;
    free(gorder);
    free(lorder);
    return ngroups * per;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define STEP p = (void **)*p;
#define STEP16 STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP

/* Follow the cycle from `start` for `steps` loads (rounded up to 16); ns elapsed.
 * The last pointer goes to *end so the loads cannot be optimised away. */
double nt_chase(void *start, uint64_t steps, void **end) {
    void **p = (void **)start;
    uint64_t n = (steps + 15) / 16;
    double t0 = now_ns();
    while (n--) { STEP16 }
    double t1 = now_ns();
    *end = (void *)p;
    return t1 - t0;
}

/* Read every byte of buf `reps` times: 16-byte vector loads, four independent sums (one cache line per
 * iteration), so the loop is limited by memory, not by adds; ns elapsed. */
typedef uint64_t v2u64 __attribute__((vector_size(16)));

double nt_read(const void *buf, size_t bytes, uint64_t reps, uint64_t *sink) {
    const v2u64 *w = buf;
    size_t n = bytes / 64;
    v2u64 a = {0, 0}, b = {0, 0}, c = {0, 0}, d = {0, 0};
    double t0 = now_ns();
    for (uint64_t r = 0; r < reps; r++) {
        const v2u64 *q = w;
        for (size_t i = 0; i < n; i++, q += 4) { a += q[0]; b += q[1]; c += q[2]; d += q[3]; }
    }
    double t1 = now_ns();
    v2u64 s = a ^ b ^ c ^ d;
    *sink = s[0] ^ s[1];
    return t1 - t0;
}
