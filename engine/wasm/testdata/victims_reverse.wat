;; Binding preemption's victim choice: every candidate may go, the last one first (the reverse of
;; the built-in order, so within a priority the oldest is taken first). Replies in binary:
;; one little-endian u32 candidate position per victim (sdk/ABI.md, flotilla_victims_v1).
(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (import "flotilla:host/v1" "set_rows" (func $set_rows (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  ;; bump allocator; grows memory on demand, never frees
  (func $alloc (export "flotilla_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then (if (i32.lt_s (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (local.get $have)) (i32.const 16)) (i32.const 1))) (i32.const 0))
        (then (unreachable)))))
    (global.set $heap (i32.and (i32.add (local.get $end) (i32.const 7)) (i32.const -8)))
    (local.get $p))
  (func (export "flotilla_dealloc") (param i32 i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_victims_v1") (param i32 i32 i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        ;; position n-1-i at 1024 + 4i
        (i32.store
          (i32.add (i32.const 1024) (i32.shl (local.get $i) (i32.const 2)))
          (i32.sub (i32.sub (local.get $n) (i32.const 1)) (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $set_rows (i32.const 1024) (i32.shl (local.get $n) (i32.const 2)))
    (i32.const 0))
)
