/* json.c — the streaming JSON writer of json.h. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void json_init(json_w *w, FILE *f, int pretty)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->pretty = pretty;
}

static void misuse(json_w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void misuse(json_w *w, const char *fmt, ...)
{
    if (w->rc)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
    w->rc = UNPAD_EINVAL;
}

void json_break(json_w *w) { w->brk = 1; }

/* What stands before a value or a closing bracket: a line break (indented, or asked for by
 * json_break) or, after a comma of JSON_LINE, a space. */
static void indent(json_w *w, int after_comma)
{
    if (w->pretty == JSON_INDENTED || w->brk) {
        fputc('\n', w->f);
        for (int i = 0; w->pretty == JSON_INDENTED && i < w->depth; i++)
            fputs("  ", w->f);
    } else if (after_comma && w->pretty == JSON_LINE) {
        fputc(' ', w->f);
    }
    w->brk = 0;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Everything a value needs before it: the separator, the indentation and the key. Returns 0 when
 * the value must not be written (misuse or an earlier failure). */
static int before_value(json_w *w, const char *key)
{
    if (w->rc)
        return 0;
    if (w->depth == 0) {
        if (w->done) {
            misuse(w, "a second top-level value");
            return 0;
        }
        if (key) {
            misuse(w, "key '%s' outside an object", key);
            return 0;
        }
        return 1;
    }
    int d = w->depth - 1;
    if (w->in_obj[d] && !key) {
        misuse(w, "a value without a key inside an object");
        return 0;
    }
    if (!w->in_obj[d] && key) {
        misuse(w, "key '%s' inside an array", key);
        return 0;
    }
    int comma = w->nonempty[d];
    if (comma)
        fputc(',', w->f);
    w->nonempty[d] = 1;
    indent(w, comma);
    if (key) {
        put_string(w->f, key);
        fputs(w->pretty != JSON_COMPACT ? ": " : ":", w->f);
    }
    return 1;
}

static void after_value(json_w *w)
{
    if (w->depth == 0)
        w->done = 1;
}

static void open_level(json_w *w, const char *key, int obj)
{
    if (!before_value(w, key))
        return;
    if (w->depth == JSON_MAX_DEPTH) {
        misuse(w, "nested deeper than %d levels", JSON_MAX_DEPTH);
        return;
    }
    fputc(obj ? '{' : '[', w->f);
    w->in_obj[w->depth] = (unsigned char)obj;
    w->nonempty[w->depth] = 0;
    w->depth++;
}

void json_obj(json_w *w, const char *key) { open_level(w, key, 1); }
void json_arr(json_w *w, const char *key) { open_level(w, key, 0); }

void json_end(json_w *w)
{
    if (w->rc)
        return;
    if (w->depth == 0) {
        misuse(w, "json_end with nothing open");
        return;
    }
    w->depth--;
    if (w->nonempty[w->depth] || w->brk)
        indent(w, 0);
    fputc(w->in_obj[w->depth] ? '}' : ']', w->f);
    after_value(w);
}

void json_str(json_w *w, const char *key, const char *v)
{
    if (!before_value(w, key))
        return;
    if (v)
        put_string(w->f, v);
    else
        fputs("null", w->f);
    after_value(w);
}

void json_format_num(double v, char *buf, size_t n)
{
    if (!isfinite(v)) {
        snprintf(buf, n, "null");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
}

void json_num(json_w *w, const char *key, double v)
{
    if (!before_value(w, key))
        return;
    char buf[40];
    json_format_num(v, buf, sizeof buf);
    fputs(buf, w->f);
    after_value(w);
}

/* A number written with printf's format fmt ("%.*g", "%.*f") at precision prec. */
static void num_printf(json_w *w, const char *key, const char *fmt, int prec, double v)
{
    if (!before_value(w, key))
        return;
    if (isfinite(v))
        fprintf(w->f, fmt, prec, v);
    else
        fputs("null", w->f);
    after_value(w);
}

void json_num_sig(json_w *w, const char *key, double v, int digits) { num_printf(w, key, "%.*g", digits, v); }
void json_num_fixed(json_w *w, const char *key, double v, int decimals) { num_printf(w, key, "%.*f", decimals, v); }

void json_int(json_w *w, const char *key, long long v)
{
    if (!before_value(w, key))
        return;
    fprintf(w->f, "%lld", v);
    after_value(w);
}

void json_bool(json_w *w, const char *key, int v)
{
    if (!before_value(w, key))
        return;
    fputs(v ? "true" : "false", w->f);
    after_value(w);
}

void json_null(json_w *w, const char *key)
{
    if (!before_value(w, key))
        return;
    fputs("null", w->f);
    after_value(w);
}

int json_finish(json_w *w, unpad_err *err)
{
    if (!w->rc && w->depth > 0)
        misuse(w, "%d level%s left open", w->depth, w->depth > 1 ? "s" : "");
    if (!w->rc && !w->done)
        misuse(w, "no value written");
    if (w->rc)
        return unpad_fail(err, w->rc, NULL, 0, "JSON: %s", w->why);
    fputc('\n', w->f);
    if (ferror(w->f))
        return unpad_fail(err, UNPAD_EIO, NULL, 0, "JSON: write failed");
    return UNPAD_OK;
}
