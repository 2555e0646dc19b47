/* multipart/form-data (RFC 7578 on RFC 2046's framing) for the audio
 * endpoints: a body parsed in place, every malformed input refused with a
 * message. No allocation: part data are pointers into the body, names and
 * filenames are unescaped into fixed arrays (longer ones are refused). */
#ifndef CANDLE_SERVER_MULTIPART_H
#define CANDLE_SERVER_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define SRV_MP_MAX_PARTS 32        /* parts per body */
#define SRV_MP_MAX_HEADER 4096     /* bytes of one part's header block */
#define SRV_MP_MAX_NAME 128        /* bytes of a field name (unescaped) */
#define SRV_MP_MAX_FILENAME 256    /* bytes of a filename (unescaped) */
#define SRV_MP_MAX_BOUNDARY 70     /* RFC 2046 */

typedef struct srv_mp_part {
    char name[SRV_MP_MAX_NAME + 1];
    char filename[SRV_MP_MAX_FILENAME + 1];
    bool has_filename;
    const char *data; /* into the body, not NUL-terminated */
    size_t len;
} srv_mp_part;

typedef struct srv_multipart {
    srv_mp_part parts[SRV_MP_MAX_PARTS];
    int n;
} srv_multipart;

/* content_type: the request's Content-Type header (NULL: missing). A part
 * without a filename (a text field) is refused over max_field bytes; a file
 * part is not bounded here (the caller compares it with its own limit).
 * Returns true, or false with a message in err. */
bool srv_multipart_parse(const char *content_type, const char *body, size_t len, size_t max_field,
                         srv_multipart *out, char *err, size_t err_len);

/* The first part named name, or NULL. */
const srv_mp_part *srv_multipart_get(const srv_multipart *m, const char *name);

#endif
