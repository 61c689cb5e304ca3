/* The responder's half of the handshake (server_internal.h "respond.c"),
 * shared by the lobby (lobby.c: every listener connection) and the
 * dispatcher (dispatch.c: in-process stages, baton_server_serve_fd and the
 * fuzz harnesses, which carry the handshake in their byte stream). */
#include <string.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "core/limits.h"
#include "server/server_internal.h"
#include "wire/wire.h"

int server_hs_hello(const struct baton_server *s, const uint8_t *req,
                    struct server_hs *st, uint8_t *rep)
{
    const struct baton_server_config *cfg = &s->cfg;
    const struct baton_key *key = NULL;
    struct baton_frame_header h;
    struct baton_hello in, out;
    size_t pos = 0;
    int rc = baton_wire_decode_header(req, BATON_FRAME_HEADER_BYTES, &pos,
                                      BATON_HELLO_BYTES, &h);
    if (rc != 0)
        return rc;
    if (h.cmd != BATON_CMD_HELLO || h.len != BATON_HELLO_BYTES)
        return BATON_E_PROTO;
    pos = 0;
    rc = baton_wire_decode_hello(req + BATON_FRAME_HEADER_BYTES, BATON_HELLO_BYTES, &pos, &in);
    if (rc != 0)
        return rc;
    if (in.role == BATON_ROLE_PEER) {
        /* peer links exist only with authentication, and a peer proves the
         * peer key: a client key cannot pose as a peer */
        if (!s->auth_required)
            return BATON_E_UNSUPPORTED;
        key = cfg->peer_key;
    } else if (in.role == BATON_ROLE_CLIENT) {
        key = cfg->client_key;
    } else {
        return BATON_E_PROTO;
    }
    if (s->auth_required && key == NULL && !(in.role == BATON_ROLE_CLIENT && cfg->n_clients > 0))
        return BATON_E_AUTH; /* no key held for this role */
    uint16_t lo = in.version_min > BATON_PROTOCOL_VERSION ? in.version_min : BATON_PROTOCOL_VERSION;
    uint16_t hi = in.version_max < BATON_PROTOCOL_VERSION ? in.version_max : BATON_PROTOCOL_VERSION;
    if (lo > hi)
        return BATON_E_VERSION;
    memset(&out, 0, sizeof out);
    out.version_min = out.version_max = hi;
    out.role = BATON_ROLE_SERVER;
    if (s->auth_required)
        out.features |= BATON_FEATURE_AUTH | (cfg->encrypt ? BATON_FEATURE_ENCRYPT : 0);
    /* the direct path needs the peer key: to prove it on our links, and to
     * verify the peers that write into our grants */
    if (cfg->peer_key)
        out.features |= BATON_FEATURE_PEER_COPY;
    out.features |= BATON_FEATURE_PIPELINE | BATON_FEATURE_OWNER_FENCE;
    baton_hs_nonce(out.nonce); /* libsodium, initialised by baton_server_create */
    struct baton_frame_header rh = {.cmd = h.cmd, .seq = h.seq, .len = BATON_HELLO_BYTES};
    baton_wire_encode_header(rep, &rh);
    baton_wire_encode_hello(rep + BATON_FRAME_HEADER_BYTES, &out);
    st->role = in.role;
    st->version = hi;
    st->need_auth = s->auth_required;
    /* the transcript: both HELLO frames, byte for byte (AUTH checks the
     * proof over it with each key the role may hold) */
    memcpy(st->transcript, req, SERVER_HELLO_FRAME_BYTES);
    memcpy(st->transcript + SERVER_HELLO_FRAME_BYTES, rep, SERVER_HELLO_FRAME_BYTES);
    return 0;
}

/* Whether proof_in is MAC_i of st's transcript under key; on success hs is
 * that key's handshake state (for the responder's proof and the keys),
 * else it is wiped. */
static int proof_matches(const struct server_hs *st, const struct baton_key *key,
                         const uint8_t *proof_in, struct baton_hs *hs)
{
    int rc = baton_hs_init(hs, st->role, baton_key_bytes(key));
    if (rc == 0)
        rc = baton_hs_transcript_add(hs, st->transcript, SERVER_HELLO_FRAME_BYTES);
    if (rc == 0)
        rc = baton_hs_transcript_add(hs, st->transcript + SERVER_HELLO_FRAME_BYTES,
                                     SERVER_HELLO_FRAME_BYTES);
    if (rc == 0)
        rc = baton_hs_verify_initiator(hs, proof_in);
    if (rc != 0)
        baton_hs_destroy(hs);
    return rc == 0;
}

int server_hs_auth(const struct baton_server *s, struct server_hs *st, const uint8_t *proof_in,
                   uint8_t *proof_out, struct server_ready *ready)
{
    const struct baton_server_config *cfg = &s->cfg;
    struct baton_hs try;
    int matched = 0, client = SERVER_CLASS_OTHER, rc;
    /* every key the role may hold is tried, also after a match (the time
     * does not say which key it was); keys differ, so at most one matches */
    if (st->role == BATON_ROLE_PEER) {
        if (cfg->peer_key && proof_matches(st, cfg->peer_key, proof_in, &try)) {
            st->hs = try;
            matched = 1;
        }
    } else {
        if (cfg->client_key && proof_matches(st, cfg->client_key, proof_in, &try)) {
            st->hs = try;
            matched = 1;
        }
        for (uint32_t i = 0; i < cfg->n_clients && i < BATON_SERVER_MAX_CLIENTS; i++) {
            if (proof_matches(st, cfg->clients[i].key, proof_in, &try)) {
                if (matched)
                    baton_hs_destroy(&st->hs);
                st->hs = try;
                matched = 1;
                client = (int)i;
            }
        }
    }
    sodium_memzero(&try, sizeof try);
    rc = matched ? 0 : BATON_E_AUTH;
    if (rc == 0)
        rc = baton_hs_responder_proof(&st->hs, proof_out);
    if (rc == 0)
        rc = baton_hs_session_keys(&st->hs, &ready->send_key, &ready->recv_key);
    baton_hs_destroy(&st->hs);
    if (rc != 0) {
        baton_frame_key_wipe(&ready->send_key);
        baton_frame_key_wipe(&ready->recv_key);
        return BATON_E_AUTH;
    }
    ready->role = st->role;
    ready->version = st->version;
    ready->tagged = 1;
    ready->client = client;
    return 0;
}

void server_log_auth_outcome(struct baton_server *s, uint64_t session, const char *peer,
                             uint8_t role, int ok, int client)
{
    const char *r = role == BATON_ROLE_PEER ? "peer" : "client";
    if (!ok) {
        server_log_auth(s, "session %llu from %s: authentication failed (%s role)",
                        (unsigned long long)session, peer, r);
        return;
    }
    const int named = client >= 0 && (uint32_t)client < s->cfg.n_clients;
    server_log_auth(s, "session %llu from %s authenticated (%s role%s%s%s)",
                    (unsigned long long)session, peer, r, named ? ", key " : "",
                    named ? s->cfg.clients[client].name : "", s->cfg.encrypt ? ", encrypted" : "");
}

void server_ready_wipe(struct server_ready *ready)
{
    baton_frame_key_wipe(&ready->send_key);
    baton_frame_key_wipe(&ready->recv_key);
    memset(ready, 0, sizeof *ready);
}

void server_header_echo(const uint8_t *hb, int status, uint8_t *cmd, uint32_t *seq)
{
    size_t pos = 4;
    *cmd = 0;
    *seq = 0;
    if (status == BATON_E_MAGIC)
        return;
    if (baton_wire_get_u8(hb, BATON_FRAME_HEADER_BYTES, &pos, cmd) != 0)
        *cmd = 0;
    pos = 8;
    if (baton_wire_get_u32(hb, BATON_FRAME_HEADER_BYTES, &pos, seq) != 0)
        *seq = 0;
}
