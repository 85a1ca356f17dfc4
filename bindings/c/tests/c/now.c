/* gnomon_now against a running `gnomon sync`'s now socket: prints what
 * it learnt as NAME=VALUE words for tests/c_programs.rs to read. Exit 0
 * when the call succeeded, 1 when it did not (the code and message are
 * printed either way). Usage: now SOCKET */
#include <stdio.h>

#include "gnomon.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: now SOCKET\n");
        return 2;
    }
    gnomon_now_result r;
    gnomon_error e = gnomon_now(argv[1], &r);
    if (e != r.code) {
        printf("code mismatch %d %d\n", (int)e, (int)r.code);
        return 3;
    }
    if (e != GNOMON_OK) {
        printf("error code=%d message=%s\n", (int)e, r.message);
        return 1;
    }
    printf("ok known=%d earliest=%lld latest=%lld round=%llu servers=%u wall=%lld inside=%d "
           "drift=%u age_ms=%lld\n",
           (int)r.known, (long long)r.earliest_unix_us, (long long)r.latest_unix_us,
           (unsigned long long)r.round, (unsigned)r.servers, (long long)r.wall_clock_unix_us,
           (int)r.wall_clock_inside, (unsigned)r.drift_ppm, (long long)(r.age_s * 1000.0));
    /* The NULL pointer checks. */
    if (gnomon_now(argv[1], NULL) != GNOMON_ERR_NULL) {
        printf("NULL out accepted\n");
        return 3;
    }
    if (gnomon_now("", &r) != GNOMON_ERR_EMPTY) {
        printf("empty path accepted\n");
        return 3;
    }
    return 0;
}
