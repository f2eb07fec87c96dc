// cmd_dump.go: DUMP and RESTORE (key ttl payload [REPLACE] [ABSTTL]
// [IDLETIME s] [FREQ f]) over rdb.go's payloads, so values move between
// engram-redis and redis-server (MIGRATE-style tools, redis-cli --rdb
// restores, backups made with DUMP).
//
// Crash behaviour: RESTORE writes the key inside the command's region.
package redis

func init() {
	reg("dump", 2, "r", k1, cmdDump)
	reg("restore", -4, "w", k1, cmdRestore)
}

func cmdDump(x *ctx) error {
	e, err := x.lookup(x.args[1])
	if err != nil {
		return err
	}
	if e == nil {
		x.w.Null()
		return nil
	}
	x.w.Bulk(dumpValue(e))
	return nil
}

func cmdRestore(x *ctx) error {
	ttl, ok := parseInt(x.args[2])
	if !ok {
		x.w.Err(errNotInt)
		return nil
	}
	replace, absTTL := false, false
	for i := 4; i < len(x.args); i++ {
		switch {
		case eq(x.args[i], "replace"):
			replace = true
		case eq(x.args[i], "absttl"):
			absTTL = true
		case (eq(x.args[i], "idletime") || eq(x.args[i], "freq")) && i+1 < len(x.args):
			n, ok := parseInt(x.args[i+1])
			if !ok {
				x.w.Err(errNotInt)
				return nil
			}
			if n < 0 {
				if eq(x.args[i], "idletime") {
					x.w.Err("ERR Invalid IDLETIME value, must be >= 0")
				} else {
					x.w.Err("ERR Invalid FREQ value, must be >= 0 and <= 255")
				}
				return nil
			}
			i++ // accepted; engram-redis keeps no LRU/LFU data
		default:
			x.w.Err(errSyntax)
			return nil
		}
	}
	if ttl < 0 {
		x.w.Err("ERR Invalid TTL value, must be >= 0")
		return nil
	}
	k := x.args[1]
	old, err := x.lookup(k)
	if err != nil {
		return err
	}
	if old != nil && !replace {
		x.w.Err("BUSYKEY Target key name already exists.")
		return nil
	}
	body, ok := checkPayload(x.args[3])
	if !ok {
		x.w.Err("ERR DUMP payload version or checksum are wrong")
		return nil
	}
	t, v, ok := restoreValue(body)
	if !ok {
		x.w.Err("ERR Bad data format")
		return nil
	}
	if absTTL && ttl != 0 && ttl <= nowMs() || isEmptyValue(v) {
		// Already expired (or nothing to store): as Redis, OK and no key.
		if old != nil {
			if _, err := x.del(k); err != nil {
				return err
			}
		}
		x.w.OK()
		return nil
	}
	if err := putAny(x, k, t, v); err != nil {
		return err
	}
	if ttl > 0 {
		at := ttl
		if !absTTL {
			at += nowMs()
		}
		e, err := x.lookup(k)
		if err != nil {
			return err
		}
		if err := setExpire(x.tx, e, at); err != nil {
			return err
		}
	}
	x.w.OK()
	return nil
}

func isEmptyValue(v any) bool {
	switch v := v.(type) {
	case [][]byte:
		return len(v) == 0
	case *hashv:
		return v.n() == 0
	case *zsetv:
		return len(v.els) == 0
	}
	return false
}

// putAny replaces k with a value of any type.
func putAny(x *ctx, k []byte, t int64, v any) error {
	if t == tString {
		_, err := x.put(k, t, v.([]byte), false)
		return err
	}
	return x.putValue(k, t, v)
}
