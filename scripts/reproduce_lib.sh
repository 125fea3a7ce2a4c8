# The experiment files of scripts/reproduce_pylo.sh, which sources this: begin an experiment, run its
# programs (bounded, their JSON lines into its file), note a line, finish or skip it, and go on from a call
# that the deadline stopped. Uses the caller's settings: dry, deadline, limit, redo, only, out, exp_dir,
# log_dir, gpu, commit, kind, quick, invocation, tmp.
# shellcheck shell=bash
now() { date +%s.%N; }
t_start=$(now)
elapsed() { awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%d", b - a }'; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
json_str() {  # a JSON string literal
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=${s//$'\n'/ }
  printf '"%s"' "$s"
}
quote() {  # a word as a shell would need it typed
  if [[ "$1" =~ ^[A-Za-z0-9_./=,:+@%-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
cmdline() { local w s=""; for w in "$@"; do s+="$(quote "$w") "; done; printf '%s' "${s% }"; }
listed() { [[ ",$1," == *",$2,"* ]]; }


stopped=0 not_done=0 name="" part="" log="" runs=0 failed=0 t_exp=0
# begin NAME TITLE [KEY=VALUE...]: starts experiment NAME, or returns 1: not selected, done earlier (its file
# ends with status ok or partial; --redo runs it again) or past the deadline. KEY=VALUE pairs go into the header.
begin() {
  name=$1
  local title=$2 file="$exp_dir/$1.jsonl"
  shift 2
  if [ -n "$only" ] && ! listed "$only" "$name"; then return 1; fi
  if [ $dry = 0 ] && [ -f "$file" ] && ! listed "$redo" "$name" &&
     tail -n 1 "$file" | grep -qE '"experiment_end":\{"status":"(ok|partial)"'; then
    echo "reproduce_pylo: $name is done ($file); skipped (--redo $name runs it again)" >&2
    return 1
  fi
  if [ -n "$deadline" ] && [ "$(elapsed)" -ge "$deadline" ]; then
    [ $stopped = 1 ] || echo "reproduce_pylo: the deadline (${deadline} s) has passed; run the same command again to go on" >&2
    stopped=1 not_done=1
    return 1
  fi
  runs=0 failed=0 t_exp=$(now)
  if [ $dry = 1 ]; then
    echo "# $name: $title"
    return 0
  fi
  part="$file.part" log="$log_dir/$name.log"
  : >"$log"
  local extra="" kv
  for kv in "$@"; do extra+=",$(json_str "${kv%%=*}"):$(json_str "${kv#*=}")"; done
  printf '{"experiment":{"name":%s,"title":%s,"kind":"%s","quick":%s,"gpu":%s,"gpus":%s,"commit":%s,"invocation":%s,"started":%s%s}}\n' \
    "$(json_str "$name")" "$(json_str "$title")" "$kind" "$([ $quick = 1 ] && echo true || echo false)" \
    "$(json_str "$gpu")" "${gpus:-0}" "$(json_str "$commit")" "$(json_str "$invocation")" \
    "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" "$extra" >"$part"
  carry_runs "$file"
  echo "reproduce_pylo: [$(elapsed) s] $name: $title" >&2
}
# carry_runs FILE: an experiment that the deadline stopped goes on where it stopped. The runs its file
# records as ended (each run's JSON lines come before its "run" line) are copied into the new file, and
# run() skips their commands, counted (a command given twice runs twice); the runs the deadline left out or
# cut short run now. --redo, a GPU of another name, or settings of its header that changed (the corpus, the
# steps) start over. Each run line names the commit it ran at (a carried line without one, from before run
# lines had it, takes its file's header's). carried: 1 when the experiment goes on.
declare -A ran=() ran_failed=()
carried_s=0 carried=0  # the stopped calls' time
settings() { head -n 1 "$1" | sed -n 's/.*"started":"[^"]*"//p'; }  # the header's KEY=VALUE pairs
carry_runs() {
  ran=() ran_failed=() carried_s=0 carried=0
  [ -f "$1" ] && ! listed "$redo" "$name" && tail -n 1 "$1" | grep -q '"experiment_end":{"status":"stopped"' || return 0
  if ! head -n 1 "$1" | grep -qF "\"gpu\":$(json_str "$gpu"),"; then  # one experiment, one kind of GPU
    echo "reproduce_pylo: $name stopped on another kind of GPU; it starts over" >&2
    return 0
  fi
  if [ "$(settings "$1")" != "$(settings "$part")" ]; then
    echo "reproduce_pylo: $name stopped with other settings ($(settings "$1")); it starts over" >&2
    return 0
  fi
  carried=1
  # The stopped calls' whole time goes on counting, runs that the deadline cut short included: a training
  # experiment keeps the seeds such a run finished, and the time they took.
  carried_s=$(tail -n 1 "$1" | sed -n 's/.*"wall_s":\([0-9.]*\).*/\1/p')
  local line key lines=() n=0 old_commit
  old_commit=$(head -n 1 "$1" | sed -n 's/.*"commit":\("[^"]*"\).*/\1/p')
  while IFS= read -r line; do
    case "$line" in
      '{"experiment":'* | '{"experiment_end":'*) ;;
      '{"run":{"cmd":'*'"exit":null'*) lines=() ;;
      '{"run":{"cmd":'*)
        key=${line#'{"run":{"cmd":'}
        key=${key%%,\"exit\":*}  # the command as json_str wrote it (its own quotes are escaped)
        ran[$key]=$((${ran[$key]:-0} + 1))
        [[ "$line" == *'"exit":0,'* ]] || ran_failed[$key]=$((${ran_failed[$key]:-0} + 1))
        [[ "$line" == *'"commit":'* ]] || line="${line%\}\}},\"commit\":${old_commit:-\"unknown\"}}}"
        printf '%s\n' "${lines[@]}" "$line" >>"$part"
        lines=()
        n=$((n + 1)) ;;
      *) lines+=("$line") ;;
    esac
  done <"$1"
  [ $n = 0 ] || echo "reproduce_pylo: $name goes on after the $n runs that ended in its stopped call" >&2
}
# note TEXT: a line of the experiment's own (a JSON object, written as given)
note() { [ $dry = 1 ] || printf '%s\n' "$1" >>"$part"; }
# run [--limit S] CMD...: one run of a program (or a script that runs programs, each under its own
# limit) under `timeout`; its JSON lines go to the experiment's file, everything else to its log.
run() {
  local lim=$limit
  if [ "$1" = --limit ]; then lim=$2; shift 2; fi
  local printed
  printed=$(cmdline "$@")
  runs=$((runs + 1))
  if [ $dry = 1 ]; then
    echo "$printed"
    return 0
  fi
  local key
  key=$(json_str "$printed")
  if [ "${ran[$key]:-0}" -gt 0 ]; then  # ended in the stopped call before (carry_runs)
    ran[$key]=$((${ran[$key]} - 1))
    if [ "${ran_failed[$key]:-0}" -gt 0 ]; then
      ran_failed[$key]=$((${ran_failed[$key]} - 1))
      failed=$((failed + 1))
    fi
    return 0
  fi
  if [ -n "$deadline" ]; then
    local left=$((deadline - $(elapsed)))
    if [ "$left" -le 0 ]; then
      stopped=1
      printf '{"run":{"cmd":%s,"exit":null,"wall_s":0,"skipped":"the deadline"}}\n' "$key" >>"$part"
      return 0
    fi
    [ "$left" -ge "$lim" ] || lim=$((left > 30 ? left : 30))
    [ "$lim" -le "$limit" ] || lim=$limit
  fi
  echo "+ $printed" >>"$log"
  local t0 rc wall
  t0=$(now)
  timeout -k 10 "$lim" "$@" >"$tmp/stdout" 2>>"$log" </dev/null
  rc=$?
  wall=$(seconds_since "$t0")
  grep -v '^{' "$tmp/stdout" >>"$log"
  if [ "$lim" -lt "$limit" ] && { [ $rc = 124 ] || [ $rc = 137 ]; }; then  # cut short by the deadline: not a result
    stopped=1
    printf '{"run":{"cmd":%s,"exit":null,"wall_s":%s,"skipped":"cut short by the deadline"}}\n' "$key" "$wall" >>"$part"
    return 0
  fi
  grep '^{' "$tmp/stdout" >>"$part"
  printf '{"run":{"cmd":%s,"exit":%d,"wall_s":%s,"commit":%s}}\n' "$key" "$rc" "$wall" "$(json_str "$commit")" >>"$part"
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "reproduce_pylo:   exit status $rc after ${wall} s: $printed (log: $log)" >&2
  fi
}
# finish: the end line; the file takes its name (done: ok or partial).
finish() {
  [ $dry = 1 ] && return 0
  local status=ok
  if [ $stopped = 1 ]; then
    status=stopped
  elif [ $failed -gt 0 ] && [ $failed -ge $runs ]; then
    status=failed
  elif [ $failed -gt 0 ]; then
    status=partial
  fi
  [ $status = ok ] || [ $status = partial ] || not_done=1
  local wall  # this call's time and that of the stopped calls before it
  wall=$(awk -v a="$(seconds_since "$t_exp")" -v b="$carried_s" 'BEGIN { printf "%.1f", a + b }')
  printf '{"experiment_end":{"status":"%s","wall_s":%s,"runs":%d,"failed":%d}}\n' "$status" "$wall" "$runs" "$failed" \
    >>"$part"
  mv "$part" "$exp_dir/$name.jsonl"
  echo "reproduce_pylo: [$(elapsed) s] $name: $status ($runs runs, $failed failed, $wall s)" >&2
}
# skip REASON: the experiment cannot run here; its file says why (and a later call tries again).
skip() {
  not_done=1
  if [ $dry = 1 ]; then
    echo "# (skipped here: $1)"
    return 0
  fi
  printf '{"experiment_end":{"status":"skipped","wall_s":0,"runs":0,"failed":0,"reason":%s}}\n' "$(json_str "$1")" >>"$part"
  mv "$part" "$exp_dir/$name.jsonl"
  echo "reproduce_pylo: $name: skipped: $1" >&2
}
