/* cfg.h — `key = value` config files (models, hardware, calibration, plans), read against a schema.
 *
 * A schema lists every accepted key with its type, range and whether it is required; the reader
 * refuses unknown keys, duplicate keys, malformed numbers, out-of-range values and missing required
 * keys, each with the file, the line, the line's text and what was expected. `#` starts a comment. */
#ifndef UNPAD_CFG_H
#define UNPAD_CFG_H

#include <stddef.h>

#include "unpad.h"

/* CFG_NAME: a string of 1..CFG_NAME_MAX letters, digits and - _ . + (a model or GPU name, as
 * trace rows and file names under models/ carry it); CFG_STRING: any text of 1..255 characters. */
typedef enum { CFG_INT, CFG_DOUBLE, CFG_STRING, CFG_BOOL, CFG_NAME } cfg_type;

#define CFG_STR_LEN 256
#define CFG_NAME_MAX 63

typedef struct {
    const char *key;
    cfg_type type;
    size_t offset;     /* offsetof(struct, field): int, double, char[CFG_STR_LEN] (string, name)
                        * or int (bool) */
    double min, max;   /* inclusive range for numbers */
    int required;
    const char *help;  /* what the key means, shown in errors */
} cfg_field;

#define CFG_REQUIRED 1
#define CFG_OPTIONAL 0

/* Parses path into the struct at dst following schema[0..n). Fields not in the file keep the
 * value dst already has (set defaults before calling). */
int cfg_load(const char *path, const cfg_field *schema, size_t n, void *dst, unpad_err *err);

/* Same, from text[0..len) in memory; name stands for the file in messages. A NUL byte or a line
 * longer than UNPAD_LINE_MAX is refused, never taken as the end of the file or cut. */
int cfg_parse(const char *name, const char *text, size_t len, const cfg_field *schema, size_t n,
              void *dst, unpad_err *err);

/* Writes dst as `key = value` lines following schema (used for plans and calibration output),
 * complete or not at all (outfile.h). */
int cfg_write(const char *path, const char *header_comment, const cfg_field *schema, size_t n,
              const void *src, unpad_err *err);

#endif
