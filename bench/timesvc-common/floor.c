/*
 * The physical floor of the NTP server's kernel path, for bench/timesvc-ntp and bench/timesvc-nts: the
 * least a server on this kernel can do per request with the same loop as timesvc's native responder
 * (packages/timesvc/native/mmsg.c): one thread blocked in recvmmsg(MSG_WAITFORONE) on a blocking UDP
 * socket, the kernel receive timestamp of each datagram from SCM_TIMESTAMPNS (socket(7) SO_TIMESTAMPNS),
 * and the batch's replies sent with sendmmsg(). No served clock, no rate limiter, no client log, no event
 * loop: a plain request (RFC 5905 §7.3, mode 3) gets a fixed reply (mode 4, stratum 8, reference "LOCL")
 * with its transmit timestamp copied to the origin timestamp, the kernel receive time as T2 and
 * CLOCK_REALTIME read per batch as T3.
 *
 * NTS (--nts KEYFILE): the same AEAD work per request as RFC 8915 §5.7 asks of any server, done once per
 * request: the cookie opened (AES-256-GCM under the master key), the request's authenticator verified
 * (AES-SIV-CMAC-256 under C2S), a fresh cookie sealed (AES-256-GCM) and the reply's authenticator sealed
 * (AES-SIV-CMAC-256 under S2C), with timesvc's own C for that work (packages/timesvc/native/ntp-nts.c,
 * nts-crypto.c, on the system libcrypto), so the floor accepts timesvc's cookies and the bench measures
 * the cost of everything around the cryptography. T3 is read before each seal (it is authenticated).
 * KEYFILE holds the master keys as timesvc derives them from nts.cookie_key: a line "current <id>", then
 * one line "<id> <64 hex digits>" per key.
 *
 * Built by the bench into a temporary directory (gcc -O2); stopped with SIGTERM.
 *
 *   floor --port P [--address 127.0.0.1] [--rcvbuf 4194304] [--nts KEYFILE]
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ntp-nts.h"

#define BATCH 64
#define SLOT 2048
#define CTRL_BYTES 64
#define NTP_UNIX_OFFSET 2208988800u

static uint8_t rx[BATCH][SLOT];
static uint8_t tx[BATCH][SLOT];
static struct sockaddr_in6 names[BATCH];
static struct mmsghdr msgs[BATCH], out[BATCH];
static struct iovec iov[BATCH], out_iov[BATCH];
static uint8_t ctrl[BATCH][CTRL_BYTES];

static void ntp_time(const struct timespec *t, uint8_t *p) {
  uint32_t s = htonl((uint32_t)t->tv_sec + NTP_UNIX_OFFSET);
  uint32_t f = htonl((uint32_t)(((uint64_t)t->tv_nsec << 32) / 1000000000u));
  memcpy(p, &s, 4);
  memcpy(p + 4, &f, 4);
}

static int load_keys(const char *path, nn_t *n) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  unsigned current = 0;
  uint32_t ids[NN_MAX_KEYS];
  uint8_t keys[NN_MAX_KEYS * 32];
  int count = 0;
  char hex[65];
  unsigned id;
  if (fscanf(f, "current %u", &current) != 1) {
    fclose(f);
    return 0;
  }
  while (count < NN_MAX_KEYS && fscanf(f, "%u %64s", &id, hex) == 2) {
    if (strlen(hex) != 64) break;
    for (int i = 0; i < 32; i++) {
      unsigned b;
      sscanf(hex + 2 * i, "%2x", &b);
      keys[count * 32 + i] = (uint8_t)b;
    }
    ids[count++] = id;
  }
  fclose(f);
  return count > 0 && nn_set_keys(n, current, ids, keys, count);
}

int main(int argc, char **argv) {
  int port = 0, rcvbuf = 4 * 1024 * 1024;
  const char *address = "127.0.0.1", *keyfile = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--address")) address = argv[i + 1];
    else if (!strcmp(argv[i], "--rcvbuf")) rcvbuf = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nts")) keyfile = argv[i + 1];
  }
  nn_t *nts = NULL;
  if (keyfile) {
    nts = calloc(1, sizeof *nts);
    if (!nts || !load_keys(keyfile, nts)) {
      fprintf(stderr, "floor: cannot load NTS keys from %s\n", keyfile);
      return 1;
    }
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (fd < 0 || inet_pton(AF_INET, address, &a.sin_addr) != 1 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("floor: socket");
    return 1;
  }
  socklen_t al = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &al);
  printf("floor listening on %s:%d (%s)\n", address, ntohs(a.sin_port), nts ? "NTS" : "NTP");
  fflush(stdout);

  /* The fixed part of every reply (RFC 5905 §7.3): LI 0, mode 4, stratum 8, precision 2^-20, "LOCL". */
  uint8_t fixed[48] = {0};
  fixed[1] = 8;
  fixed[3] = (uint8_t)(int8_t)-20;
  fixed[15] = 0x10; /* root dispersion 1/16 s */
  memcpy(fixed + 12, "LOCL", 4);
  struct timespec start;
  clock_gettime(CLOCK_REALTIME, &start);
  ntp_time(&start, fixed + 16);

  for (int i = 0; i < BATCH; i++) {
    iov[i].iov_base = rx[i];
    iov[i].iov_len = SLOT;
  }
  for (;;) {
    for (int i = 0; i < BATCH; i++) {
      struct msghdr *h = &msgs[i].msg_hdr;
      h->msg_name = &names[i];
      h->msg_namelen = sizeof names[i];
      h->msg_iov = &iov[i];
      h->msg_iovlen = 1;
      h->msg_control = ctrl[i];
      h->msg_controllen = CTRL_BYTES;
      h->msg_flags = 0;
    }
    int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("floor: recvmmsg");
      return 1;
    }
    struct timespec t3;
    clock_gettime(CLOCK_REALTIME, &t3);
    int count = 0;
    for (int i = 0; i < n; i++) {
      struct msghdr *h = &msgs[i].msg_hdr;
      int len = (int)msgs[i].msg_len;
      const uint8_t *req = rx[i];
      if (len < 48 || (h->msg_flags & MSG_TRUNC) || (req[0] & 7) != 3) continue;
      uint8_t *p = tx[count];
      memcpy(p, fixed, 48);
      p[0] = (uint8_t)((req[0] & 0x38) | 4);
      p[2] = req[2];
      memcpy(p + 24, req + 40, 8); /* origin = the request's transmit timestamp */
      struct timespec t2 = t3;
      for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) memcpy(&t2, CMSG_DATA(c), sizeof t2);
      }
      ntp_time(&t2, p + 32);
      int reply = 48;
      if (nts) {
        /* Only authentic NTS requests are answered (the floor has no other case to handle). */
        nn_reply_t r;
        if (len <= 48 || nn_check(nts, req, len, 0, &r) != NN_AUTHENTIC || r.length > SLOT) continue;
        clock_gettime(CLOCK_REALTIME, &t3);
        ntp_time(&t3, p + 40);
        reply = nn_seal(nts, &r, req, p);
        if (reply <= 0) continue;
      } else {
        ntp_time(&t3, p + 40);
      }
      struct msghdr *o = &out[count].msg_hdr;
      memset(o, 0, sizeof *o);
      o->msg_name = &names[i];
      o->msg_namelen = sizeof(struct sockaddr_in);
      out_iov[count].iov_base = p;
      out_iov[count].iov_len = (size_t)reply;
      o->msg_iov = &out_iov[count];
      o->msg_iovlen = 1;
      count++;
    }
    for (int at = 0; at < count;) {
      int r = sendmmsg(fd, out + at, (unsigned)(count - at), MSG_DONTWAIT);
      if (r < 0) {
        if (errno == EINTR) continue;
        break; /* send buffer full: the rest is dropped */
      }
      at += r;
    }
  }
}
