# Independent hand check of smaps fixtures: prints per-class sums in kB.
function hex(s,   i,v,c) { v=0; s=tolower(s); for (i=1;i<=length(s);i++) { c=index("0123456789abcdef", substr(s,i,1))-1; v=v*16+c } return v }
function flush() {
  if (start == "") return
  cls = "?"
  if (path == "[heap]") cls = "heap"
  else if (path == "[stack]") cls = "stack"
  else if (path ~ /^\[anon:/) cls = "anon"
  else if (path ~ /^\[/) cls = "special"
  else if (path != "") cls = (perms ~ /s$/ && (path ~ /^\/dev\/zero/ || path ~ /^\/SYSV/ || path ~ /^\/memfd:/ || path ~ /^\/dev\/shm\//)) ? "special" : "file"
  else cls = "anonpending"
  n++; S[n]=start; E[n]=end; P[n]=perms; C[n]=cls; R[n]=rss; Z[n]=size
}
/^[0-9a-f]+-[0-9a-f]+ / { flush(); split($1, a, "-"); start=a[1]; end=a[2]; perms=$2; path=""; for (i=6;i<=NF;i++) path = path (i>6?" ":"") $i; rss=0; size=0; next }
/^Rss:/ { rss=$2; trss+=$2 }
/^Size:/ { size=$2 }
/^Anonymous:/ { tanon+=$2 }
/^Swap:/ { tswap+=$2 }
END {
  flush()
  for (i=1;i<=n;i++) {
    if (C[i] != "anonpending") continue
    s = hex(S[i]); e = hex(E[i])
    if (P[i] == "rw-p" && s % 67108864 == 0) {
      j = i + 1; ext = e
      while (j <= n && C[j]=="anonpending" && P[j]=="---p" && hex(S[j])==ext && hex(E[j]) <= s+67108864) { ext = hex(E[j]); j++ }
      if (ext == s + 67108864) { C[i]="arena"; for (k=i+1;k<j;k++) C[k]="arenatail"; continue }
    }
    if (P[i] == "rw-p" && i > 1 && C[i-1]=="anonpending" && P[i-1]=="---p" && hex(E[i-1])==s && hex(E[i-1])-hex(S[i-1]) <= 1048576) { C[i]="stack"; continue }
  }
  for (i=1;i<=n;i++) { c=C[i]; if (c=="anonpending") c="anon"; if (c=="arenatail") c="arena"; else if (c=="arena") { narena++; arsize+=Z[i] } ; if (c=="stack") nstack++; sum[c]+=R[i]; if (S[i] != "" && (C[i]=="anonpending"||C[i]=="arena"||C[i]=="arenatail"||C[i]=="stack"&&1)) {} }
  for (c in sum) printf "%s_rss_kb=%d\n", c, sum[c]
  for (i=1;i<=n;i++) if (C[i]!="file" && C[i]!="special") nanon++; for (i=1;i<=n;i++) if (R[i]>best) { best=R[i]; bi=i }; printf "anon_mappings=%d largest=%s-%s rss_kb=%d size_kb=%d cls=%s\n", nanon, S[bi], E[bi], R[bi], Z[bi], C[bi]
  printf "mappings=%d rss_kb=%d anon_kb=%d swap_kb=%d arenas=%d arena_size_kb=%d stacks=%d\n", n, trss, tanon, tswap, narena, arsize, nstack
}
