/* Names and descriptions of enum baton_status. */
#include "baton/status.h"

struct status_entry {
    const char *name;
    const char *text;
};

static const struct status_entry status_table[] = {
    {"OK", "success"},
    {"E_INVAL", "malformed field or argument"},
    {"E_BOUNDS", "range outside its buffer or tensor"},
    {"E_TYPE", "unknown tensor type"},
    {"E_UNSUPPORTED", "type, op or feature not supported by this build"},
    {"E_SHAPE", "inconsistent shape or strides"},
    {"E_OVERFLOW", "size arithmetic would overflow"},
    {"E_NOT_OWNED", "handle belongs to another session"},
    {"E_STALE_HANDLE", "handle was freed or never existed"},
    {"E_GRAPH", "malformed graph"},
    {"E_LIMIT", "limit exceeded"},
    {"E_QUOTA", "memory quota exhausted"},
    {"E_NOMEM", "out of memory"},
    {"E_INDEX", "index in tensor data out of range"},
    {"E_MAGIC", "bad frame magic"},
    {"E_CMD", "unknown command"},
    {"E_PROTO", "protocol violation"},
    {"E_VERSION", "no common protocol version"},
    {"E_IO", "connection error or closed"},
    {"E_TIMEOUT", "deadline passed"},
    {"E_AUTH", "authentication failed or required"},
    {"E_TRUNCATED", "input ended inside a field"},
    {"E_FORMAT", "file format error"},
    {"E_NOT_FOUND", "not found"},
    {"E_FENCE", "a boundary input did not land, or an earlier step failed"},
};

static const struct status_entry *status_lookup(int status)
{
    if (status > 0 || status < BATON_E_STATUS_MIN)
        return 0;
    return &status_table[-status];
}

const char *baton_status_name(int status)
{
    const struct status_entry *e = status_lookup(status);
    return e ? e->name : "E_UNKNOWN";
}

const char *baton_status_str(int status)
{
    const struct status_entry *e = status_lookup(status);
    return e ? e->text : "unknown error";
}
