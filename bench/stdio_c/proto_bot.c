/*
 * The C bench bot of bench/bench_stdio.py: length-delimited protobuf on stdio, no library.
 *
 * It says Hello, then answers every Turn with its first legal action. Per Turn it reads the
 * varint length and the body with read(2) into one buffer, walks the protobuf fields it needs
 * (ServerMessage.turn = 3; Turn.match_id = 1, turn_id = 2, legal_actions = 4, packed or not)
 * and skips the rest, encodes BotMessage.action (= 2) {match_id, turn_id, action} and writes it
 * with one write(2). It times its own work per move, from the first byte of the Turn in hand to
 * the answer written, and prints "work_us <median>" on stderr every 100 moves, like the Python
 * bench bots. Only used by the benchmark, not a client for players (clients/c/ is that).
 *
 * Build: gcc -O2 -o proto_bot proto_bot.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned char in[1 << 16];
static size_t have = 0, pos = 0;
static double work[1 << 20];
static size_t moves = 0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Makes at least n unread bytes available; 0 at end of input. */
static int need(size_t n) {
    if (pos > 0 && have - pos < n) {
        memmove(in, in + pos, have - pos);
        have -= pos;
        pos = 0;
    }
    while (have - pos < n) {
        if (n > sizeof in) return 0;
        ssize_t got = read(0, in + have, sizeof in - have);
        if (got <= 0) return 0;
        have += (size_t)got;
    }
    return 1;
}

static int varint(const unsigned char **p, const unsigned char *end, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = value;
            return 1;
        }
    }
    return 0;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Skips one field of the given wire type; 0 when malformed. */
static int skip(const unsigned char **p, const unsigned char *end, int type) {
    uint64_t n;
    switch (type) {
        case 0: return varint(p, end, &n);
        case 1: *p += 8; return *p <= end;
        case 2:
            if (!varint(p, end, &n) || n > (uint64_t)(end - *p)) return 0;
            *p += n;
            return 1;
        case 5: *p += 4; return *p <= end;
        default: return 0;
    }
}

static void answer(const unsigned char *turn, const unsigned char *end) {
    const unsigned char *match_id = NULL;
    uint64_t match_len = 0, turn_id = 0, action = 0, key;
    int have_action = 0;
    while (turn < end && varint(&turn, end, &key)) {
        int field = (int)(key >> 3), type = (int)(key & 7);
        if (field == 1 && type == 2) {
            if (!varint(&turn, end, &match_len)) return;
            match_id = turn;
            turn += match_len;
        } else if (field == 2 && type == 0) {
            if (!varint(&turn, end, &turn_id)) return;
        } else if (field == 4 && type == 2) {
            uint64_t len;
            if (!varint(&turn, end, &len)) return;
            const unsigned char *q = turn;
            if (!have_action && len > 0 && varint(&q, turn + len, &action)) have_action = 1;
            turn += len;
        } else if (field == 4 && type == 0) {
            uint64_t value;
            if (!varint(&turn, end, &value)) return;
            if (!have_action) action = value, have_action = 1;
        } else if (!skip(&turn, end, type)) {
            return;
        }
    }
    unsigned char body[512], out[520], *p = body;
    if (match_len > 256) return;
    *p++ = 0x0a; /* Action.match_id */
    p = put_varint(p, match_len);
    memcpy(p, match_id, match_len);
    p += match_len;
    *p++ = 0x10; /* Action.turn_id */
    p = put_varint(p, turn_id);
    if (action) {
        *p++ = 0x18; /* Action.action */
        p = put_varint(p, action); /* a negative int32 arrives sign-extended to 64 bits */
    }
    size_t action_len = (size_t)(p - body);
    unsigned char *o = out + 8;
    unsigned char *q = o;
    *q++ = 0x12; /* BotMessage.action */
    q = put_varint(q, action_len);
    memcpy(q, body, action_len);
    q += action_len;
    size_t msg_len = (size_t)(q - o);
    unsigned char head[10];
    unsigned char *h = put_varint(head, msg_len);
    size_t head_len = (size_t)(h - head);
    memcpy(o - head_len, head, head_len);
    if (write(1, o - head_len, head_len + msg_len) < 0) exit(1);
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(void) {
    size_t from = moves / 10, n = moves - from;
    static double sorted[1 << 20];
    memcpy(sorted, work + from, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, compare);
    fprintf(stderr, "work_us %.2f\n", sorted[n / 2] * 1e6);
    fflush(stderr);
}

int main(void) {
    /* Hello { protocol_version: "arena.v1", games: ["rps"] } inside BotMessage.hello (= 1). */
    static const unsigned char hello[] = {17, 0x0a, 15, 0x0a, 8, 'a', 'r', 'e', 'n', 'a', '.', 'v', '1', 0x22, 3, 'r', 'p', 's'};
    if (write(1, hello, sizeof hello) < 0) return 1;
    for (;;) {
        if (!need(1)) return 0;
        double start = now();
        uint64_t size = 0;
        const unsigned char *p;
        for (size_t n = 1;; n++) {
            if (!need(n)) return 0;
            p = in + pos;
            if (varint(&p, in + pos + n, &size)) break;
            if (n >= 10) return 1;
        }
        size_t head = (size_t)(p - (in + pos));
        if (!need(head + size)) return 0;
        const unsigned char *msg = in + pos + head, *end = msg + size;
        pos += head + size;
        uint64_t key;
        const unsigned char *q = msg;
        if (!varint(&q, end, &key)) continue;
        if (key == ((3 << 3) | 2)) { /* ServerMessage.turn */
            uint64_t len;
            if (!varint(&q, end, &len) || len > (uint64_t)(end - q)) continue;
            answer(q, q + len);
            if (moves < sizeof work / sizeof *work) work[moves++] = now() - start;
            if (moves % 100 == 0) report();
        }
    }
}
