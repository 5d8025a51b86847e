/*
 * An Arena bot in C: rock-paper-scissors and tic-tac-toe over JSON-lines stdio.
 *
 * Only the C standard library. The server writes one JSON object per line,
 * compact and with every field present, e.g.
 *   {"turn":{"matchId":"m1","turnId":3,"observation":{"rps":{...}},"legalActions":[0,1,2],...}}
 * and the bot answers with one line per Turn:
 *   {"action":{"matchId":"m1","turnId":3,"action":1}}
 * The first key of a line says what it is, so a tiny field finder is enough.
 *
 * Build:  gcc -std=c11 -O2 -Wall -o arena-c-bot bot.c
 * Check:  arena check-bot --cmd ./arena-c-bot --framing json
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ACTIONS 4096

/* Read one whole line of any length; returns NULL at end of input. */
static char *read_line(void) {
    static char *buf = NULL;
    static size_t cap = 0;
    size_t len = 0;
    if (buf == NULL) {
        cap = 4096;
        buf = malloc(cap);
        if (buf == NULL) return NULL;
    }
    for (;;) {
        if (fgets(buf + len, (int)(cap - len), stdin) == NULL) return len ? buf : NULL;
        len += strlen(buf + len);
        if (len > 0 && buf[len - 1] == '\n') return buf;
        cap *= 2;
        char *bigger = realloc(buf, cap);
        if (bigger == NULL) return NULL;
        buf = bigger;
    }
}

/* Pointer just after "key": in line, or NULL. */
static const char *field(const char *line, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(line, pattern);
    return at ? at + strlen(pattern) : NULL;
}

static long int_field(const char *line, const char *key, long fallback) {
    const char *at = field(line, key);
    return at ? strtol(at, NULL, 10) : fallback;
}

/* Copies the string value of key (no escapes expected in ids) into out. */
static void string_field(const char *line, const char *key, char *out, size_t size) {
    const char *at = field(line, key);
    out[0] = '\0';
    if (at == NULL || *at != '"') return;
    at++;
    size_t n = 0;
    while (at[n] && at[n] != '"' && n + 1 < size) {
        out[n] = at[n];
        n++;
    }
    out[n] = '\0';
}

/* Parses the integer array value of key into out; returns the count. */
static int int_array(const char *line, const char *key, int *out, int max) {
    const char *at = field(line, key);
    int count = 0;
    if (at == NULL || *at != '[') return 0;
    at++;
    while (*at && *at != ']' && count < max) {
        char *end;
        long value = strtol(at, &end, 10);
        if (end == at) break;
        out[count++] = (int)value;
        at = end;
        while (*at == ',' || *at == ' ') at++;
    }
    return count;
}

static int contains(const int *values, int count, int value) {
    for (int i = 0; i < count; i++)
        if (values[i] == value) return 1;
    return 0;
}

static int my_seat = 0;

/* This bot's seat from a MatchStarted line: the "seat" key outside the "seats" list.
 * (Keys inside an object may come in any order, so the list is skipped over.) */
static int started_seat(char *line) {
    char *list = strstr(line, "\"seats\":[");
    if (list != NULL) {
        char *end = strchr(list, ']');
        for (char *p = list; end != NULL && p <= end; p++) *p = ' ';
    }
    return (int)int_field(line, "seat", 0); /* absent means the default, 0 */
}

static int choose_rps(const char *line, const int *legal, int nlegal) {
    int last[2];
    int signs = (int)int_field(line, "signs", 3);
    if (int_array(line, "lastRound", last, 2) == 2 && signs == 3) {
        int beat = (last[1 - my_seat] + 1) % 3; /* paper beats rock, and so on */
        if (contains(legal, nlegal, beat)) return beat;
    }
    return legal[rand() % nlegal];
}

/* The cell that completes k in a row for seat `who` (or -1). */
static int winning_cell(const int *board, int rows, int cols, int k, int who, const int *legal, int nlegal) {
    static const int dirs[4][2] = {{0, 1}, {1, 0}, {1, 1}, {1, -1}};
    for (int i = 0; i < nlegal; i++) {
        int cell = legal[i], r0 = cell / cols, c0 = cell % cols;
        for (int d = 0; d < 4; d++) {
            int run = 1;
            for (int sign = -1; sign <= 1; sign += 2) {
                int r = r0 + sign * dirs[d][0], c = c0 + sign * dirs[d][1];
                while (r >= 0 && r < rows && c >= 0 && c < cols && board[r * cols + c] == who) {
                    run++;
                    r += sign * dirs[d][0];
                    c += sign * dirs[d][1];
                }
            }
            if (run >= k) return cell;
        }
    }
    return -1;
}

static int choose_tic_tac_toe(const char *line, const int *legal, int nlegal) {
    static int board[MAX_ACTIONS];
    int rows = (int)int_field(line, "rows", 3), cols = (int)int_field(line, "cols", 3);
    int k = (int)int_field(line, "k", 3);
    if (int_array(line, "board", board, MAX_ACTIONS) != rows * cols) return legal[0];
    int cell = winning_cell(board, rows, cols, k, my_seat, legal, nlegal);
    if (cell < 0) cell = winning_cell(board, rows, cols, k, 1 - my_seat, legal, nlegal);
    if (cell < 0 && contains(legal, nlegal, (rows / 2) * cols + cols / 2)) cell = (rows / 2) * cols + cols / 2;
    return cell >= 0 ? cell : legal[rand() % nlegal];
}

int main(int argc, char **argv) {
    static int legal[MAX_ACTIONS];
    char match_id[256];
    srand(argc > 1 ? (unsigned)atoi(argv[1]) : 1u);
    printf("{\"hello\":{\"protocolVersion\":\"arena.v1\",\"name\":\"c-bot\","
           "\"games\":[\"rps\",\"tic_tac_toe\"],\"client\":\"arena-c/1\"}}\n");
    fflush(stdout);
    char *line;
    while ((line = read_line()) != NULL) {
        if (strncmp(line, "{\"matchStarted\"", 15) == 0) {
            my_seat = started_seat(line);
        } else if (strncmp(line, "{\"turn\"", 7) == 0) {
            int nlegal = int_array(line, "legalActions", legal, MAX_ACTIONS);
            if (nlegal == 0) return 1;
            string_field(line, "matchId", match_id, sizeof match_id);
            long turn_id = int_field(line, "turnId", 0);
            int action = field(line, "ticTacToe") ? choose_tic_tac_toe(line, legal, nlegal)
                                                   : choose_rps(line, legal, nlegal);
            printf("{\"action\":{\"matchId\":\"%s\",\"turnId\":%ld,\"action\":%d}}\n", match_id, turn_id, action);
            fflush(stdout);
        } else if (strncmp(line, "{\"matchEnded\"", 13) == 0) {
            return 0;
        } else if (strncmp(line, "{\"error\"", 8) == 0) {
            fprintf(stderr, "server error: %s", line);
            if (strstr(line, "\"fatal\":true")) return 1;
        }
    }
    return 0;
}
