/*
 * The load generator of bench/timesvc-ntp and bench/timesvc-nts, in C so that it is not the limit: one
 * process, 16 UDP sockets bound to 127.0.1.1-127.0.1.16 and connected to the server, requests sent on a
 * schedule (request i is due at i / rate seconds after the start; what is due is sent at once with
 * sendmmsg, round robin over the sockets), replies read with recvmmsg whenever ppoll() reports them
 * between sends. A reply counts when it is at least --min-reply bytes and carries the bench's mark
 * (0x7e57beef in the first half of its origin timestamp, copied from the request's transmit timestamp).
 *
 *   gen --port P --rate R --ms M [--requests FILE --size L] [--min-reply 48] [--sample FILE]
 *   gen --calibrate --ms M     (the generator's own ceiling: sending as fast as it can to a socket that is
 *                               never read, so no server limits it)
 *
 * Without --requests, request i is a plain NTP request (mode 3) with i in bytes 44-47; with it, request i
 * is record i mod N of the file (N records of L bytes). With --sample, every 64th counted reply (at most
 * 256) is written to FILE (u16 length, then the bytes) for the bench to verify. Prints one JSON line:
 * sent, received, sendMs (first to last send), lateMaxUs (how far the sending fell behind its schedule at
 * worst), cpuMs (the generator's own CPU time, getrusage), sendErrors.
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg, ppoll */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SOURCES 16
#define BURST 64
#define RXBATCH 64
#define RXSLOT 2048
#define MARK 0x7e57beefu

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint8_t rxbuf[RXBATCH][RXSLOT];
static struct pollfd fds[SOURCES];
static struct mmsghdr rmsgs[RXBATCH];
static struct iovec riov[RXBATCH];
static uint8_t *seen; /* plain requests: replies counted once per sequence number */
static long total, received, counted;
static int min_reply = 48, samples;
static FILE *sample;
static double last_reply;

/* The replies waiting on the sockets ppoll() reported ready (`ready` > 0), counted as above. */
static void drain(int ready) {
  for (int k = 0; ready > 0 && k < SOURCES; k++) {
    if (!(fds[k].revents & POLLIN)) continue;
    for (;;) {
      for (int i = 0; i < RXBATCH; i++) {
        memset(&rmsgs[i].msg_hdr, 0, sizeof rmsgs[i].msg_hdr);
        rmsgs[i].msg_hdr.msg_iov = &riov[i];
        rmsgs[i].msg_hdr.msg_iovlen = 1;
      }
      int n = recvmmsg(fds[k].fd, rmsgs, RXBATCH, MSG_DONTWAIT, NULL);
      if (n <= 0) break;
      last_reply = now_s();
      for (int i = 0; i < n; i++) {
        const uint8_t *m = rxbuf[i];
        uint32_t mark, seq;
        if ((int)rmsgs[i].msg_len < min_reply) continue;
        memcpy(&mark, m + 24, 4);
        memcpy(&seq, m + 28, 4);
        if (ntohl(mark) != MARK) continue;
        seq = ntohl(seq);
        if (seen) {
          if (seq >= (uint32_t)total || seen[seq]) continue;
          seen[seq] = 1;
        }
        received++;
        if (sample && counted++ % 64 == 0 && samples < 256) {
          uint16_t l = (uint16_t)rmsgs[i].msg_len;
          fwrite(&l, 2, 1, sample);
          fwrite(m, 1, l, sample);
          samples++;
        }
      }
      if (n < RXBATCH) break;
    }
  }
}

int main(int argc, char **argv) {
  int port = 0, calibrate = 0, size = 48;
  double rate = 1000, ms = 1000;
  const char *reqfile = NULL, *samplefile = NULL;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(argv[i], "--calibrate")) {
      calibrate = 1;
      continue;
    }
    if (!strcmp(argv[i], "--port")) port = atoi(v);
    else if (!strcmp(argv[i], "--rate")) rate = atof(v);
    else if (!strcmp(argv[i], "--ms")) ms = atof(v);
    else if (!strcmp(argv[i], "--requests")) reqfile = v;
    else if (!strcmp(argv[i], "--size")) size = atoi(v);
    else if (!strcmp(argv[i], "--min-reply")) min_reply = atoi(v);
    else if (!strcmp(argv[i], "--sample")) samplefile = v;
    i++;
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* wake on schedule, not up to 50 µs late */
  uint8_t *records = NULL;
  long nrec = 0;
  if (reqfile) {
    FILE *f = fopen(reqfile, "rb");
    if (!f || size <= 0 || size > RXSLOT) {
      fprintf(stderr, "gen: cannot read %s\n", reqfile);
      return 1;
    }
    fseek(f, 0, SEEK_END);
    nrec = ftell(f) / size;
    fseek(f, 0, SEEK_SET);
    records = malloc((size_t)nrec * size);
    if (!records || nrec == 0 || fread(records, (size_t)size, (size_t)nrec, f) != (size_t)nrec) {
      fprintf(stderr, "gen: short read of %s\n", reqfile);
      return 1;
    }
    fclose(f);
  }
  int sink = -1;
  if (calibrate) {
    /* A socket of ours that is never read: the kernel queues what fits and drops the rest, quietly. */
    sink = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in s = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &s.sin_addr);
    socklen_t sl = sizeof s;
    if (bind(sink, (struct sockaddr *)&s, sizeof s) != 0 || getsockname(sink, (struct sockaddr *)&s, &sl) != 0) {
      perror("gen: sink");
      return 1;
    }
    port = ntohs(s.sin_port);
    rate = 1e9;
  }
  total = calibrate ? 0 : (long)(rate * ms / 1000.0 + 0.5);
  for (int k = 0; k < SOURCES; k++) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int buf = 4 * 1024 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    struct sockaddr_in src = {.sin_family = AF_INET};
    char ip[32];
    snprintf(ip, sizeof ip, "127.0.1.%d", k + 1);
    inet_pton(AF_INET, ip, &src.sin_addr);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 || connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
      perror("gen: socket");
      return 1;
    }
    fds[k].fd = fd;
    fds[k].events = POLLIN;
  }
  /* Per socket, the requests of one burst (at most BURST in all). */
  static uint8_t plain[BURST][48];
  struct mmsghdr msgs[SOURCES][BURST];
  struct iovec iovs[SOURCES][BURST];
  int counts[SOURCES];
  for (int i = 0; i < RXBATCH; i++) {
    riov[i].iov_base = rxbuf[i];
    riov[i].iov_len = RXSLOT;
  }
  seen = total > 0 && !records ? calloc((size_t)total, 1) : NULL;
  sample = samplefile ? fopen(samplefile, "wb") : NULL;
  long sent = 0, errors = 0;
  double late_max = 0;
  double start = now_s(), last_send = start;
  last_reply = start;
  double calibrate_end = start + ms / 1000.0;
  for (;;) {
    double t = now_s();
    if (calibrate ? t >= calibrate_end : sent >= total) break;
    long due = calibrate ? sent + BURST : (long)((t - start) * rate) + 1; /* request i is due at i / rate */
    if (due > total && !calibrate) due = total;
    if (due > sent) {
      double late = t - (start + (double)sent / rate);
      if (!calibrate && late > late_max) late_max = late;
      long upto = due - sent > BURST ? sent + BURST : due;
      memset(counts, 0, sizeof counts);
      for (long i = sent; i < upto; i++) {
        int k = (int)(i % SOURCES);
        uint8_t *req;
        if (records) {
          req = records + (size_t)(i % nrec) * size;
        } else {
          req = plain[i - sent];
          memset(req, 0, 48);
          req[0] = 0x23; /* LI 0, VN 4, mode 3 */
          req[2] = 6;
          uint32_t m = htonl(MARK), s = htonl((uint32_t)i);
          memcpy(req + 40, &m, 4);
          memcpy(req + 44, &s, 4);
        }
        int c = counts[k]++;
        iovs[k][c].iov_base = req;
        iovs[k][c].iov_len = records ? (size_t)size : 48;
        memset(&msgs[k][c].msg_hdr, 0, sizeof msgs[k][c].msg_hdr);
        msgs[k][c].msg_hdr.msg_iov = &iovs[k][c];
        msgs[k][c].msg_hdr.msg_iovlen = 1;
      }
      for (int k = 0; k < SOURCES; k++) {
        for (int at = 0; at < counts[k];) {
          int r = sendmmsg(fds[k].fd, msgs[k] + at, (unsigned)(counts[k] - at), 0);
          if (r < 0) {
            if (errno == EINTR) continue;
            errors += counts[k] - at; /* counted as sent: the server did not answer them */
            break;
          }
          at += r;
        }
      }
      sent = upto;
      last_send = now_s();
    }
    /* Replies, and the wait until the next request is due. */
    struct timespec wait = {0, 0};
    if (!calibrate && sent < total) {
      double next = start + (double)sent / rate - now_s();
      if (next > 0) wait.tv_nsec = (long)(next * 1e9) % 1000000000, wait.tv_sec = (time_t)next;
    }
    drain(ppoll(fds, SOURCES, &wait, NULL));
  }
  double send_end = last_send;
  /* The tail: replies until none came for 50 ms, at most 300 ms after the last send. */
  while (!calibrate) {
    double t = now_s();
    if (t - last_send > 0.3 || t - last_reply > 0.05) break;
    struct timespec wait = {0, 5000000};
    drain(ppoll(fds, SOURCES, &wait, NULL));
  }
  if (sample) fclose(sample);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                  (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  printf("{\"sent\":%ld,\"received\":%ld,\"sendMs\":%.3f,\"lateMaxUs\":%.1f,\"cpuMs\":%.3f,\"sendErrors\":%ld}\n",
         sent, received, (send_end - start) * 1e3, late_max * 1e6, cpu_ms, errors);
  if (sink >= 0) close(sink);
  return 0;
}
