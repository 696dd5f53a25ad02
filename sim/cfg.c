/* cfg.c — schema-driven `key = value` reader and writer. */
#include "cfg.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static const char *type_word(cfg_type t)
{
    switch (t) {
    case CFG_INT: return "an integer";
    case CFG_DOUBLE: return "a number";
    case CFG_STRING: return "a word";
    case CFG_BOOL: return "true or false";
    case CFG_NAME: return "a name";
    }
    return "?";
}

static int set_field(const char *name, int lineno, const char *line, const cfg_field *f,
                     const char *val, void *dst, unpad_err *err)
{
    char *p = (char *)dst + f->offset;
    switch (f->type) {
    case CFG_INT: {
        long v;
        if (unpad_parse_long(val, &v) != UNPAD_OK) {
            unpad_fail(err, UNPAD_EINVAL, name, lineno,
                       "bad number '%s' for key '%s' (expected an integer in [%g, %g]: %s)", val,
                       f->key, f->min, f->max, f->help);
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        if ((double)v < f->min || (double)v > f->max || v < INT_MIN || v > INT_MAX) {
            unpad_fail(err, UNPAD_EINVAL, name, lineno,
                       "%s = %ld is out of range (expected an integer in [%g, %g]: %s)", f->key, v,
                       f->min, f->max, f->help);
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        *(int *)p = (int)v;
        return UNPAD_OK;
    }
    case CFG_DOUBLE: {
        double v;
        if (unpad_parse_double(val, &v) != UNPAD_OK) {
            unpad_fail(err, UNPAD_EINVAL, name, lineno,
                       "bad number '%s' for key '%s' (expected a number in [%g, %g]: %s)", val,
                       f->key, f->min, f->max, f->help);
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        if (v < f->min || v > f->max) {
            unpad_fail(err, UNPAD_EINVAL, name, lineno,
                       "%s = %g is out of range (expected a number in [%g, %g]: %s)", f->key, v,
                       f->min, f->max, f->help);
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        *(double *)p = v;
        return UNPAD_OK;
    }
    case CFG_STRING:
        if (strlen(val) >= CFG_STR_LEN || val[0] == '\0') {
            unpad_fail(err, UNPAD_EINVAL, name, lineno, "value of '%s' must be 1 to %d characters",
                       f->key, CFG_STR_LEN - 1);
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        strcpy(p, val);
        return UNPAD_OK;
    case CFG_NAME: {
        size_t n = strspn(val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+");
        if (val[n] != '\0' || n == 0 || n > CFG_NAME_MAX) {
            unpad_fail(err, UNPAD_EINVAL, name, lineno,
                       "bad name '%s' for key '%s' (expected 1 to %d letters, digits and - _ . +: %s)",
                       val, f->key, CFG_NAME_MAX, f->help);
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        strcpy(p, val);
        return UNPAD_OK;
    }
    case CFG_BOOL:
        if (!strcmp(val, "true") || !strcmp(val, "1") || !strcmp(val, "yes"))
            *(int *)p = 1;
        else if (!strcmp(val, "false") || !strcmp(val, "0") || !strcmp(val, "no"))
            *(int *)p = 0;
        else {
            unpad_fail(err, UNPAD_EINVAL, name, lineno, "bad value '%s' for key '%s' (expected %s)",
                       val, f->key, type_word(f->type));
            unpad_err_show_line(err, lineno, line);
            return UNPAD_EINVAL;
        }
        return UNPAD_OK;
    }
    return UNPAD_EINVAL;
}

int cfg_parse(const char *name, const char *text, size_t len, const cfg_field *schema, size_t n,
              void *dst, unpad_err *err)
{
    int *seen = calloc(n ? n : 1, sizeof *seen);
    if (!seen)
        return unpad_fail(err, UNPAD_ENOMEM, name, 0, "out of memory");
    int rc = UNPAD_OK, r, lineno;
    unpad_lines it;
    char raw[UNPAD_LINE_MAX + 1];
    unpad_lines_init(&it, name, text, len);
    while ((r = unpad_lines_next(&it, err)) > 0) {
        lineno = it.lineno;
        memcpy(raw, it.line, it.len + 1);
        char *hash = strchr(it.line, '#');
        if (hash)
            *hash = '\0';
        char *line = trim(it.line);
        if (!*line)
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            rc = unpad_fail(err, UNPAD_EINVAL, name, lineno, "expected 'key = value'");
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        *eq = '\0';
        char *key = trim(line), *val = trim(eq + 1);
        size_t i;
        for (i = 0; i < n; i++)
            if (!strcmp(schema[i].key, key))
                break;
        if (i == n) {
            rc = unpad_fail(err, UNPAD_EINVAL, name, lineno, "unknown key '%.200s' (known keys:", key);
            for (size_t j = 0; j < n; j++) {
                size_t m = strlen(err ? err->msg : "");
                if (err && m + strlen(schema[j].key) + 4 < sizeof err->msg)
                    snprintf(err->msg + m, sizeof err->msg - m, " %s", schema[j].key);
            }
            if (err && strlen(err->msg) + 2 < sizeof err->msg)
                strcat(err->msg, ")");
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        if (seen[i]) {
            rc = unpad_fail(err, UNPAD_EINVAL, name, lineno, "key '%s' given twice (first on line %d)",
                            key, seen[i]);
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        if (!*val) {
            rc = unpad_fail(err, UNPAD_EINVAL, name, lineno, "key '%s' has no value (expected %s: %s)",
                            key, type_word(schema[i].type), schema[i].help);
            unpad_err_show_line(err, lineno, raw);
            goto out;
        }
        seen[i] = lineno;
        rc = set_field(name, lineno, raw, &schema[i], val, dst, err);
        if (rc)
            goto out;
    }
    if (r < 0) {
        rc = err ? err->code : UNPAD_EINVAL;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (schema[i].required && !seen[i]) {
            rc = unpad_fail(err, UNPAD_EINVAL, name, 0, "missing required key '%s' (%s: %s)",
                            schema[i].key, type_word(schema[i].type), schema[i].help);
            goto out;
        }
out:
    free(seen);
    return rc;
}

int cfg_load(const char *path, const cfg_field *schema, size_t n, void *dst, unpad_err *err)
{
    char *text;
    size_t len;
    int rc = unpad_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    rc = cfg_parse(path, text, len, schema, n, dst, err);
    free(text);
    return rc;
}

int cfg_write(const char *path, const char *header_comment, const cfg_field *schema, size_t n,
              const void *src, unpad_err *err)
{
    unpad_outfile *o;
    int rc = outfile_open(path, &o, err);
    if (rc)
        return rc;
    FILE *f = outfile_stream(o);
    if (header_comment)
        fprintf(f, "# %s\n", header_comment);
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)src + schema[i].offset;
        if ((schema[i].type == CFG_STRING || schema[i].type == CFG_NAME) && !*p && !schema[i].required)
            continue; /* an optional text left empty: absent, as the reader takes it */
        switch (schema[i].type) {
        case CFG_INT: fprintf(f, "%s = %d", schema[i].key, *(const int *)p); break;
        case CFG_DOUBLE: fprintf(f, "%s = %.10g", schema[i].key, *(const double *)p); break;
        case CFG_STRING:
        case CFG_NAME: fprintf(f, "%s = %s", schema[i].key, p); break;
        case CFG_BOOL: fprintf(f, "%s = %s", schema[i].key, *(const int *)p ? "true" : "false"); break;
        }
        fprintf(f, "%*s# %s\n", 4, "", schema[i].help);
    }
    return outfile_commit(o, err);
}
