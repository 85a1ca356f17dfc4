/* What the C test programs (api.c, panic.c, consensus.c) share: the
 * checking macro, which counts each check and stops the program at the
 * first that fails, naming it, and the UDP socket they talk to
 * `gnomon serve` through (inline: consensus.c needs no server). */
#ifndef GNOMON_TEST_CHECK_H
#define GNOMON_TEST_CHECK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

static int checks;

#define CHECK(cond)                                                        \
  do {                                                                     \
    checks++;                                                              \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* A UDP socket with a 10 s receive timeout, and `host_port` ("HOST:PORT",
 * IPv4) as the address to send to. */
static inline int udp_to(const char *host_port,
                         struct sockaddr_in *server) {
  char host[64];
  int port;
  CHECK(sscanf(host_port, "%63[^:]:%d", host, &port) == 2);
  memset(server, 0, sizeof *server);
  server->sin_family = AF_INET;
  server->sin_port = htons((uint16_t)port);
  CHECK(inet_pton(AF_INET, host, &server->sin_addr) == 1);
  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  CHECK(sock >= 0);
  struct timeval patience = {10, 0};
  CHECK(setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &patience,
                   sizeof patience) == 0);
  return sock;
}

#endif
