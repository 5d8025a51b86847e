#!/bin/sh
# An Arena bot in POSIX shell over JSON-lines stdio: plays any game.
#
# The server writes one compact JSON object per line; the first key says what
# it is. For every Turn the bot answers with one line naming the match, the
# turn and an action from legalActions (here: cycling through the legal list).
#
#   arena check-bot --cmd "sh clients/shell/bot.sh" --framing json

field() { # field NAME LINE: the number or string value of "NAME": in LINE
    printf '%s\n' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

printf '{"hello":{"protocolVersion":"arena.v1","name":"shell-bot","client":"arena-sh/1"}}\n'
count=0
while IFS= read -r line; do
    case "$line" in
    '{"turn"'*)
        match_id=$(field matchId "$line")
        turn_id=$(field turnId "$line")
        legal=$(printf '%s\n' "$line" | sed -n 's/.*"legalActions":\[\([^]]*\)\].*/\1/p' | tr ',' ' ')
        set -- $legal
        pick=$((count % $# + 1))
        eval "action=\${$pick}"
        count=$((count + 1))
        printf '{"action":{"matchId":"%s","turnId":%s,"action":%s}}\n' "$match_id" "$turn_id" "$action"
        ;;
    '{"matchEnded"'*)
        exit 0
        ;;
    '{"error"'*)
        printf 'server error: %s\n' "$line" >&2
        ;;
    esac
done
