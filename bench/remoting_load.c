/* Load generator for the RocketMQ remoting port: GET_ROUTEINFO_BY_TOPIC (code 105) requests,
 * pipelined on N connections for a fixed time; prints requests/s and latency percentiles.
 *
 *   remoting_load HOST PORT TOPIC CONNECTIONS WINDOW SECONDS
 *
 * One thread, epoll, non-blocking sockets: each connection keeps WINDOW requests outstanding
 * (JSON headers as a Java client writes them, a new opaque each), reads length-prefixed response
 * frames, checks that each is a response (flag 1) with code 0, and records its latency by its
 * opaque. Output: one line of JSON. Compiled by bench/hotpath.py with gcc -O2. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_US 1000000 /* latency histogram: 1 us buckets up to 1 s, the rest in the last */
#define MAX_CONNS 1024
#define MAX_WINDOW 1024

struct conn {
    int fd;
    uint32_t next_opaque;
    int outstanding;
    double sent_at[MAX_WINDOW]; /* by opaque % window */
    char *in;
    size_t in_len, in_cap;
    char out[65536];
    size_t out_len, out_off;
};

static long long hist[MAX_US + 1];
static long long done_count, in_time, errors;
static const char *topic;
static int window;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void queue_request(struct conn *c, double t) {
    char header[512];
    uint32_t opaque = c->next_opaque++;
    int hlen = snprintf(header, sizeof header,
                        "{\"code\":105,\"extFields\":{\"topic\":\"%s\"},\"flag\":0,"
                        "\"language\":\"JAVA\",\"opaque\":%u,\"serializeTypeCurrentRPC\":\"JSON\","
                        "\"version\":479}", topic, opaque);
    if (c->out_len + 8 + hlen > sizeof c->out) {
        fprintf(stderr, "output buffer full\n");
        exit(2);
    }
    uint32_t total = htonl(4 + hlen), hword = htonl(hlen);
    memcpy(c->out + c->out_len, &total, 4);
    memcpy(c->out + c->out_len + 4, &hword, 4);
    memcpy(c->out + c->out_len + 8, header, hlen);
    c->out_len += 8 + hlen;
    c->sent_at[opaque % window] = t;
    c->outstanding++;
}

static void flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) {
            if (errno == EAGAIN) return;
            die("write");
        }
        c->out_off += n;
    }
    c->out_len = c->out_off = 0;
}

/* The value of "key":<digits> in a JSON header, or -1. */
static long long json_int(const char *h, size_t len, const char *key) {
    char pat[32];
    int plen = snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = memmem(h, len, pat, plen);
    if (!p) return -1;
    p += plen;
    long long v = 0;
    while (p < h + len && *p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
    return v;
}

static void on_frames(struct conn *c, double t, int running) {
    size_t pos = 0;
    while (c->in_len - pos >= 8) {
        uint32_t total, hword;
        memcpy(&total, c->in + pos, 4);
        memcpy(&hword, c->in + pos + 4, 4);
        total = ntohl(total);
        hword = ntohl(hword) & 0xFFFFFF;
        if (c->in_len - pos - 4 < total) break;
        const char *h = c->in + pos + 8;
        long long opaque = json_int(h, hword, "opaque");
        if (json_int(h, hword, "code") != 0 || json_int(h, hword, "flag") != 1 || opaque < 0)
            errors++;
        else {
            long long us = (long long)((t - c->sent_at[opaque % window]) * 1e6);
            hist[us < 0 ? 0 : us > MAX_US ? MAX_US : us]++;
            done_count++;
            in_time += running;
        }
        c->outstanding--;
        pos += 4 + total;
        if (running) queue_request(c, t);
    }
    memmove(c->in, c->in + pos, c->in_len - pos);
    c->in_len -= pos;
}

static double percentile(double q) {
    long long target = (long long)(q * done_count), seen = 0;
    for (int i = 0; i <= MAX_US; i++) {
        seen += hist[i];
        if (seen > target) return i / 1000.0;
    }
    return MAX_US / 1000.0;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s HOST PORT TOPIC CONNECTIONS WINDOW SECONDS\n", argv[0]);
        return 2;
    }
    topic = argv[3];
    int nconns = atoi(argv[4]);
    window = atoi(argv[5]);
    double seconds = atof(argv[6]);
    if (nconns < 1 || nconns > MAX_CONNS || window < 1 || window > MAX_WINDOW || seconds <= 0)
        return 2;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &addr.sin_addr);
    int ep = epoll_create1(0);
    struct conn *conns = calloc(nconns, sizeof *conns);
    double start = now();
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0) die("fcntl");
        c->in_cap = 1 << 20;
        c->in = malloc(c->in_cap);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    start = now();
    for (int i = 0; i < nconns; i++) {
        for (int k = 0; k < window; k++) queue_request(&conns[i], start);
        flush_out(&conns[i]);
    }
    double deadline = start + seconds;
    struct epoll_event events[MAX_CONNS];
    int open_requests = 1;
    while (open_requests) {
        double t = now();
        int running = t < deadline;
        if (!running) { /* drain what is outstanding, for at most one more second */
            open_requests = 0;
            for (int i = 0; i < nconns; i++) open_requests += conns[i].outstanding;
            if (!open_requests || t > deadline + 1.0) break;
        }
        int n = epoll_wait(ep, events, MAX_CONNS, 100);
        t = now();
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (events[i].events & EPOLLIN) {
                for (;;) {
                    if (c->in_cap - c->in_len < 65536) {
                        c->in_cap *= 2;
                        c->in = realloc(c->in, c->in_cap);
                    }
                    ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
                    if (r < 0 && errno == EAGAIN) break;
                    if (r <= 0) die("read (connection closed)");
                    c->in_len += r;
                }
                on_frames(c, t, running);
            }
            flush_out(c);
        }
    }
    printf("{\"requests\":%lld,\"errors\":%lld,\"seconds\":%.3f,\"requests_per_s\":%.1f,"
           "\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f}\n",
           done_count, errors, seconds, in_time / seconds,
           percentile(0.5), percentile(0.9), percentile(0.99));
    return errors ? 1 : 0;
}
