#!/usr/bin/env bash
# vault_rotate.sh - rotate every key of the payments-prod vault to its next version.
#
#   ./vault_rotate.sh --plan   the dry run: print the rotation plan (rotation id, each key's
#                              current and next version, the fingerprint of the new key);
#                              never asks for a password, never rotates
#   ./vault_rotate.sh          the rotation: unlock the vault with its password, asked on the
#                              terminal (/dev/tty, echo off - not on standard input), then rotate
#   ./vault_rotate.sh --help   this summary
#
# The plan is drawn once (rotation id, new key fingerprints, the unlock challenge the password
# prompt shows) and kept in .vault-rotate/plan.env, so the dry run and the rotation agree. Every
# invocation appends what it did to .vault-rotate/log.jsonl: it started (and whether it had a
# terminal), the plan, the password prompt it is about to wait at (with the time), whether a
# password was read (its length only, never the password), whether it rotated, and a signal that
# ended it.

set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE_DIR=$HERE/.vault-rotate
STATE=$STATE_DIR/plan.env
LOG=$STATE_DIR/log.jsonl
KEYRING=$HERE/vault/keyring.conf
ALPHABET=ABCDEFGHJKLMNPQRSTUVWXYZ23456789
ECHO_OFF=0

rand_hex() {  # rand_hex N: 2N lower-case hex digits
    od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'
}

rand_code() {  # rand_code N: N characters of ALPHABET
    local out="" b
    for b in $(od -An -N"$1" -tu1 /dev/urandom); do
        out+=${ALPHABET:$((b % ${#ALPHABET})):1}
    done
    printf '%s' "$out"
}

RUN=$(rand_hex 4)  # this invocation

now() {  # seconds since the epoch, with milliseconds
    local t=${EPOCHREALTIME-}
    [ -n "$t" ] || t=$(date +%s.%N)
    printf '%s' "${t:0:14}"
}

log() {  # log EVENT [JSON_FIELDS]: one JSON line appended to the log
    mkdir -p "$STATE_DIR"
    local fields=${2:+, $2}
    printf '{"run": "%s", "pid": %d, "t": %s, "event": "%s"%s}\n' "$RUN" "$$" "$(now)" "$1" "$fields" >>"$LOG"
}

# ------------------------------------------------------------------ the keyring and the plan

VAULT=""
PATHS=()
VERSIONS=()

read_keyring() {
    local kind a b
    while read -r kind a b; do
        case $kind in
            vault) VAULT=$a ;;
            key) PATHS+=("$a"); VERSIONS+=("$b") ;;
        esac
    done <"$KEYRING"
}

ROTATION_ID=""
CHALLENGE=""
FPS=()

ensure_plan() {  # draw the plan once (the first invocation wins), then read it
    mkdir -p "$STATE_DIR"
    if [ ! -s "$STATE" ]; then
        local tmp i
        tmp=$(mktemp "$STATE_DIR/.plan.XXXXXX")
        {
            printf 'rotation_id=ROT-%s\n' "$(rand_code 8)"
            printf 'challenge=%s-%s\n' "$(rand_code 4)" "$(rand_code 4)"
            for i in "${!PATHS[@]}"; do
                printf 'fp%d=sha256:%s\n' "$((i + 1))" "$(rand_hex 8)"
            done
        } >"$tmp"
        ln "$tmp" "$STATE" 2>/dev/null  # atomic: fails if another invocation drew it first
        rm -f "$tmp"
    fi
    local k v
    while IFS='=' read -r k v; do
        case $k in
            rotation_id) ROTATION_ID=$v ;;
            challenge) CHALLENGE=$v ;;
            fp[0-9]*) FPS[$((${k#fp} - 1))]=$v ;;
        esac
    done <"$STATE"
}

plan_json() {
    local i keys=""
    for i in "${!PATHS[@]}"; do
        keys+="${keys:+, }{\"path\": \"${PATHS[i]}\", \"from_version\": ${VERSIONS[i]}, \"to_version\": $((VERSIONS[i] + 1)), \"fingerprint\": \"${FPS[i]}\"}"
    done
    printf '{"vault": "%s", "rotation_id": "%s", "keys": [%s]}' "$VAULT" "$ROTATION_ID" "$keys"
}

print_plan() {
    local i
    printf 'vault_rotate.sh: rotation plan %s for vault %s (%d keys)\n' "$ROTATION_ID" "$VAULT" "${#PATHS[@]}"
    for i in "${!PATHS[@]}"; do
        printf '  %d. %-26s v%-3s -> v%-3s  new key %s\n' "$((i + 1))" "${PATHS[i]}" "${VERSIONS[i]}" \
            "$((VERSIONS[i] + 1))" "${FPS[i]}"
    done
}

# ------------------------------------------------------------------ commands

cmd_plan() {
    log plan "\"mode\": \"plan\", \"plan\": $(plan_json)"
    print_plan
    printf 'dry run: no password asked, nothing rotated\n'
    return 0
}

on_signal() {  # the rotation was stopped while it waited: restore the echo, log the signal
    trap '' HUP INT TERM  # ignored from here: a hangup that follows the first signal must not cut the log short
    if [ "$ECHO_OFF" = 1 ]; then
        stty echo </dev/tty 2>/dev/null
    fi
    log ended "\"signal\": \"SIG$1\""
    exit "$((128 + $2))"
}

cmd_rotate() {
    log plan "\"mode\": \"rotate\", \"plan\": $(plan_json)"
    printf 'vault_rotate.sh: rotation %s of vault %s, %d keys (the plan: ./vault_rotate.sh --plan)\n' \
        "$ROTATION_ID" "$VAULT" "${#PATHS[@]}"
    printf 'unlocking vault %s\n' "$VAULT"
    if [ "$HAVE_TTY" != true ]; then
        printf 'vault_rotate.sh: cannot open /dev/tty: the vault password is read from the terminal only; run it on a terminal. Nothing rotated.\n' >&2
        log no_tty
        return 2
    fi
    local prompt="Vault password for $VAULT (unlock challenge $CHALLENGE):"
    local pw="" eof=false
    trap 'on_signal HUP 1' HUP
    trap 'on_signal INT 2' INT
    trap 'on_signal TERM 15' TERM
    printf '%s ' "$prompt" >/dev/tty
    stty -echo </dev/tty 2>/dev/null && ECHO_OFF=1
    log prompt "\"prompt\": \"$prompt\", \"echo_off\": $([ "$ECHO_OFF" = 1 ] && echo true || echo false)"
    IFS= read -r pw </dev/tty || eof=true
    if [ "$ECHO_OFF" = 1 ]; then
        stty echo </dev/tty 2>/dev/null
        ECHO_OFF=0
    fi
    printf '\n' >/dev/tty 2>/dev/null  # the newline the terminal did not echo
    trap - HUP INT TERM
    log answer "\"eof\": $eof, \"length\": ${#pw}"
    if [ -z "$pw" ]; then
        if [ "$eof" = true ]; then
            printf 'no password read (end of input): nothing rotated\n'
        else
            printf 'empty password: nothing rotated\n'
        fi
        log not_rotated
        return 1
    fi
    local tmp i
    tmp=$(mktemp "$HERE/vault/.keyring.XXXXXX")
    {
        printf '# keyring of the %s vault: one line per key, "key <path> <version>"\n' "$VAULT"
        printf 'vault %s\n' "$VAULT"
        for i in "${!PATHS[@]}"; do
            printf 'key %s %d\n' "${PATHS[i]}" "$((VERSIONS[i] + 1))"
        done
    } >"$tmp"
    mv "$tmp" "$KEYRING"
    log rotated "\"rotation_id\": \"$ROTATION_ID\""
    printf 'rotated %d keys of vault %s (rotation %s)\n' "${#PATHS[@]}" "$VAULT" "$ROTATION_ID"
    return 0
}

usage() {
    sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

main() {
    local mode
    case "${1-}" in
        --plan) mode=plan ;;
        "") mode=rotate ;;
        -h | --help) usage; return 0 ;;
        *) usage >&2; return 2 ;;
    esac
    if [ "$#" -gt 1 ]; then
        usage >&2
        return 2
    fi
    HAVE_TTY=false
    if { : >/dev/tty; } 2>/dev/null; then
        HAVE_TTY=true
    fi
    local stdin_tty=false
    [ -t 0 ] && stdin_tty=true
    log start "\"mode\": \"$mode\", \"stdin_tty\": $stdin_tty, \"ctty\": $HAVE_TTY"
    read_keyring
    ensure_plan
    "cmd_$mode"
}

main "$@"
