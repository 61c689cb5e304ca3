/* Status codes shared by libbaton, batond and the wire protocol.
 *
 * Every function that can fail returns 0 (BATON_OK) or one of the negative
 * codes below. On the wire a reply carries the code negated as a u16
 * (docs/PROTOCOL.md, "Status codes"); the numbers are part of the protocol
 * and never change meaning.
 */
#ifndef BATON_STATUS_H
#define BATON_STATUS_H

enum baton_status {
    BATON_OK = 0,
    BATON_E_INVAL = -1,        /* malformed field or argument */
    BATON_E_BOUNDS = -2,       /* range or extent outside its buffer/tensor */
    BATON_E_TYPE = -3,         /* unknown or retired tensor type id */
    BATON_E_UNSUPPORTED = -4,  /* known type/op/feature that this build does not execute */
    BATON_E_SHAPE = -5,        /* ne/nb inconsistent, block multiple, shape mismatch */
    BATON_E_OVERFLOW = -6,     /* 64-bit arithmetic on sizes would wrap */
    BATON_E_NOT_OWNED = -7,    /* handle belongs to another session */
    BATON_E_STALE_HANDLE = -8, /* handle was freed (generation mismatch) or never existed */
    BATON_E_GRAPH = -9,        /* bad graph: source index, arity, cycle, out leaf */
    BATON_E_LIMIT = -10,       /* a configured limit (nodes, message bytes, ...) */
    BATON_E_QUOTA = -11,       /* memory quota exhausted */
    BATON_E_NOMEM = -12,       /* allocation failed */
    BATON_E_INDEX = -13,       /* index read from tensor data out of range at run time */
    BATON_E_MAGIC = -14,       /* frame does not start with "BATN" (framing error) */
    BATON_E_CMD = -15,         /* unknown command (framing error) */
    BATON_E_PROTO = -16,       /* protocol state: command not allowed now, bad reply */
    BATON_E_VERSION = -17,     /* no common protocol version */
    BATON_E_IO = -18,          /* socket error or peer closed */
    BATON_E_TIMEOUT = -19,     /* a deadline passed */
    BATON_E_AUTH = -20,        /* authentication failed or required */
    BATON_E_TRUNCATED = -21,   /* input ended inside a field */
    BATON_E_FORMAT = -22,      /* file format error (GGUF, key file, policy) */
    BATON_E_NOT_FOUND = -23,   /* named thing (tensor, key, file) not present */
    BATON_E_FENCE = -24,       /* a boundary input a run waits for did not land: cancelled,
                                  failed, overwritten or past its deadline; or an earlier
                                  run of the session failed (GRAPH_RUN) */
    BATON_E_STATUS_MIN = -24
};

/* Returns a static, human-readable name for a status ("E_BOUNDS", ...).
 * Never NULL; unknown codes give "E_UNKNOWN". */
const char *baton_status_name(int status);

/* Returns a static one-line description of a status. Never NULL. */
const char *baton_status_str(int status);

#endif
