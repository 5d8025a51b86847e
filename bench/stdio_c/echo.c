/*
 * The C child of bench/bench_stdio.py's bare baselines: echoes what it reads, 8 bytes at a time,
 * with read(2) and write(2), until end of input. Build: gcc -O2 -o echo echo.c
 */
#include <unistd.h>

int main(void) {
    char buf[8];
    for (;;) {
        ssize_t got = read(0, buf, sizeof buf);
        if (got <= 0) return 0;
        if (write(1, buf, (size_t)got) != got) return 1;
    }
}
