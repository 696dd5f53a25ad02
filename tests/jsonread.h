/* jsonread.h — a tiny JSON reader for the tests: parses a document into a tree so a test can
 * check what unpad wrote (every key, its type). Strict enough to refuse what a JSON parser
 * would: trailing commas, bare words, unescaped control characters, trailing garbage. */
#ifndef UNPAD_TEST_JSONREAD_H
#define UNPAD_TEST_JSONREAD_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { JR_NULL, JR_BOOL, JR_NUM, JR_STR, JR_ARR, JR_OBJ } jr_type;

typedef struct jr_node {
    jr_type t;
    int is_int;              /* a number written without fraction or exponent */
    double num;              /* JR_NUM; JR_BOOL: 0 or 1 */
    char *str;               /* JR_STR */
    int n;                   /* JR_ARR, JR_OBJ: entries */
    char **keys;             /* JR_OBJ: (n) */
    struct jr_node **kids;   /* (n) */
} jr_node;

typedef struct {
    const char *s, *start;
    char why[160];
} jr_in;

static inline void jr_free(jr_node *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n; i++) {
        jr_free(v->kids[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->kids);
    free(v->keys);
    free(v->str);
    free(v);
}

static inline void jr_ws(jr_in *in)
{
    while (*in->s == ' ' || *in->s == '\n' || *in->s == '\r' || *in->s == '\t')
        in->s++;
}

static inline int jr_fail(jr_in *in, const char *what)
{
    if (!in->why[0])
        snprintf(in->why, sizeof in->why, "offset %ld: %s", (long)(in->s - in->start), what);
    return 0;
}

static inline char *jr_string(jr_in *in)
{
    if (*in->s != '"') {
        jr_fail(in, "expected a string");
        return NULL;
    }
    in->s++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    for (;;) {
        unsigned char c = (unsigned char)*in->s++;
        if (n + 8 > cap)
            out = realloc(out, cap *= 2);
        if (c == '"')
            break;
        if (c < 0x20) {
            jr_fail(in, c ? "control character in a string" : "unterminated string");
            free(out);
            return NULL;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        c = (unsigned char)*in->s++;
        const char *esc = strchr("\"\\/bfnrt", c);
        if (esc && c) {
            static const char rep[] = "\"\\/\b\f\n\r\t";
            out[n++] = rep[esc - "\"\\/bfnrt"];
        } else if (c == 'u' && isxdigit((unsigned char)in->s[0]) && isxdigit((unsigned char)in->s[1]) &&
                   isxdigit((unsigned char)in->s[2]) && isxdigit((unsigned char)in->s[3])) {
            char hex[5] = {in->s[0], in->s[1], in->s[2], in->s[3], 0};
            long u = strtol(hex, NULL, 16);
            in->s += 4;
            if (u < 0x80) {
                out[n++] = (char)u;
            } else if (u < 0x800) {
                out[n++] = (char)(0xc0 | (u >> 6));
                out[n++] = (char)(0x80 | (u & 0x3f));
            } else {
                out[n++] = (char)(0xe0 | (u >> 12));
                out[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (u & 0x3f));
            }
        } else {
            jr_fail(in, "bad escape");
            free(out);
            return NULL;
        }
    }
    out[n] = '\0';
    return out;
}

static inline jr_node *jr_value(jr_in *in, int depth);

static inline jr_node *jr_add(jr_node *v, char *key, jr_node *kid)
{
    v->kids = realloc(v->kids, (size_t)(v->n + 1) * sizeof *v->kids);
    if (v->t == JR_OBJ) {
        v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *v->keys);
        v->keys[v->n] = key;
    }
    v->kids[v->n++] = kid;
    return v;
}

static inline jr_node *jr_value(jr_in *in, int depth)
{
    jr_ws(in);
    if (depth > 64) {
        jr_fail(in, "nested too deep");
        return NULL;
    }
    jr_node *v = calloc(1, sizeof *v);
    char c = *in->s;
    if (c == '{' || c == '[') {
        v->t = c == '{' ? JR_OBJ : JR_ARR;
        char close = c == '{' ? '}' : ']';
        in->s++;
        jr_ws(in);
        if (*in->s == close) {
            in->s++;
            return v;
        }
        for (;;) {
            char *key = NULL;
            jr_ws(in);
            if (v->t == JR_OBJ) {
                if (!(key = jr_string(in)))
                    goto bad;
                jr_ws(in);
                if (*in->s++ != ':') {
                    free(key);
                    jr_fail(in, "expected ':'");
                    goto bad;
                }
            }
            jr_node *kid = jr_value(in, depth + 1);
            if (!kid) {
                free(key);
                goto bad;
            }
            jr_add(v, key, kid);
            jr_ws(in);
            if (*in->s == ',') {
                in->s++;
                continue;
            }
            if (*in->s++ == close)
                return v;
            jr_fail(in, "expected ',' or the end of the object or array");
            goto bad;
        }
    }
    if (c == '"') {
        v->t = JR_STR;
        if (!(v->str = jr_string(in)))
            goto bad;
        return v;
    }
    static const char *const words[3] = {"null", "true", "false"};
    for (int i = 0; i < 3; i++)
        if (!strncmp(in->s, words[i], strlen(words[i]))) {
            in->s += strlen(words[i]);
            v->t = i ? JR_BOOL : JR_NULL;
            v->num = i == 1;
            return v;
        }
    if (c == '-' || isdigit((unsigned char)c)) {
        const char *p = in->s + (c == '-');
        if (!isdigit((unsigned char)*p) || (p[0] == '0' && isdigit((unsigned char)p[1]))) {
            jr_fail(in, "bad number");
            goto bad;
        }
        char *end;
        v->t = JR_NUM;
        v->num = strtod(in->s, &end);
        v->is_int = 1;
        for (const char *q = in->s; q < end; q++)
            if (*q == '.' || *q == 'e' || *q == 'E')
                v->is_int = 0;
        in->s = end;
        return v;
    }
    jr_fail(in, "expected a value");
bad:
    jr_free(v);
    return NULL;
}

/* The document in text, or NULL with the reason in why. */
static inline jr_node *jr_parse(const char *text, char *why, size_t n)
{
    jr_in in = {text, text, ""};
    jr_node *v = jr_value(&in, 0);
    if (v) {
        jr_ws(&in);
        if (*in.s) {
            jr_fail(&in, "text after the document");
            jr_free(v);
            v = NULL;
        }
    }
    if (!v && why)
        snprintf(why, n, "%s", in.why);
    return v;
}

static inline const jr_node *jr_get(const jr_node *obj, const char *key)
{
    if (!obj || obj->t != JR_OBJ)
        return NULL;
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key))
            return obj->kids[i];
    return NULL;
}

#endif
