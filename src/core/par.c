/* How many threads a parallel region gets (par.h): enough work to pay for the team, and no more threads than the
 * cores other processes leave idle.
 *
 * Idle OpenMP workers sleep (tools/qkv/wait_policy.c), so a region first wakes them and then waits for the last
 * one: tens of microseconds even on an idle machine, which a small region does not win back. When another process
 * keeps a core busy, a second thread shares that core with it and every region waits until the scheduler runs
 * that thread: a decode step at batch 1 (a few regions of well under a millisecond) ran 26% slower at 2 threads
 * than at 1 (docs/benchmarks.md). One thread would then do the same work sooner, so the count a region gets is
 * also cut to the cores that are idle. Those are measured, not guessed from the load average (which counts this
 * process's own threads): the machine's busy CPU time from /proc/stat minus this process's CPU time, over the
 * interval since the previous sample, is what the other processes used. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/par.h"

#define SAMPLE_NS 200000000LL /* between two load samples */
#define STALE_NS 2000000000LL /* a longer interval says little about now: it only starts a new one */

static atomic_int cores_free;       /* the last estimate, 0 = none yet */
static atomic_int cores_forced;     /* qkv__par_set_cores_free; 0 = measure */
static atomic_llong next_sample_ns; /* CLOCK_MONOTONIC time of the next sample */
static atomic_flag sampling = ATOMIC_FLAG_INIT;

/* The previous sample; read and written only by the thread holding `sampling`. */
static struct {
    bool ok;
    double busy, own, wall; /* seconds: the machine's busy CPU time, this process's CPU time, monotonic time */
} prev;

static long long now_ns(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Busy CPU seconds of the whole machine since boot from /proc/stat's first line ("cpu  user nice system idle iowait
 * irq softirq steal ..." in clock ticks): everything but idle and iowait. Steal is time the hypervisor gave to
 * other guests, as unavailable to us as a core another process holds. False when it cannot be read. */
static bool machine_busy(double *busy) {
    int fd = open("/proc/stat", O_RDONLY);
    if (fd < 0) return false;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 5 || buf[0] != 'c' || buf[1] != 'p' || buf[2] != 'u' || buf[3] != ' ') return false;
    buf[n] = '\0';
    char *p = buf + 4, *end;
    double v[8];
    for (int i = 0; i < 8; i++, p = end) {
        v[i] = (double)strtoull(p, &end, 10);
        if (end == p) return false;
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0) return false;
    *busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
    return true;
}

/* One sample: updates cores_free from the interval since the previous one. */
static void sample(long long now) {
    double busy;
    long long own = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (!machine_busy(&busy) || ncpu < 1) {
        prev.ok = false;
        return;
    }
    double wall = (double)now * 1e-9, own_s = (double)own * 1e-9;
    if (prev.ok && wall - prev.wall > 0 && wall - prev.wall < STALE_NS * 1e-9) {
        /* Clock ticks (10 ms) and CPU time do not line up exactly; over a 200 ms interval on 2 cores the error is a
         * tick or two, a tenth of a core, well inside the rounding below. */
        double others = ((busy - prev.busy) - (own_s - prev.own)) / (wall - prev.wall);
        if (others < 0) others = 0;
        long f = lround((double)ncpu - others);
        atomic_store(&cores_free, (int)(f < 1 ? 1 : f > ncpu ? ncpu : f));
    }
    prev.ok = true;
    prev.busy = busy;
    prev.own = own_s;
    prev.wall = wall;
}

int qkv__par_cores_free(void) {
    int forced = atomic_load(&cores_forced);
    if (forced > 0) return forced;
#ifdef CLOCK_MONOTONIC_COARSE
    long long now = now_ns(CLOCK_MONOTONIC_COARSE); /* a few ns: asked on every region worth threads */
#else
    long long now = now_ns(CLOCK_MONOTONIC);
#endif
    if (now >= atomic_load(&next_sample_ns) && !atomic_flag_test_and_set(&sampling)) {
        /* one thread samples; the others keep the last estimate meanwhile */
        atomic_store(&next_sample_ns, now + SAMPLE_NS);
        sample(now);
        atomic_flag_clear(&sampling);
    }
    return atomic_load(&cores_free);
}

void qkv__par_set_cores_free(int n) { atomic_store(&cores_forced, n > 0 ? n : 0); }

int qkv__par_threads(double work) {
    if (!(work >= QKV__PAR_MIN) || omp_in_parallel()) return 1;
    int n = omp_get_max_threads();
    if (n <= 1) return 1;
    if (work >= QKV__PAR_SHARED_MIN) return n;
    int f = qkv__par_cores_free();
    return f > 0 && f < n ? f : n;
}
