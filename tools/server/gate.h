/* The gate's header check (gate_parse.c), apart from the rest of the server
 * so that its fuzzer needs neither libmicrohttpd nor jansson. */
#ifndef CANDLE_SERVER_GATE_H
#define CANDLE_SERVER_GATE_H

#include <stddef.h>

#define SRV_GATE_HEADER_MAX 16384 /* bytes of a request's header block */
#define SRV_GATE_URI_MAX 8192     /* bytes of its request target */

/* The length of the header block in buf[0..n) (through its blank line), 0
 * while it is incomplete. */
size_t srv_gate_header_len(const char *buf, size_t n);
/* Check a complete header block buf[0..n): 0 (hand it on), or the status
 * that refuses it (400, 414, 501, 505), with an error code and a message. */
int srv_gate_check(const char *buf, size_t n, const char **code, char *msg, size_t msg_cap);

#endif
