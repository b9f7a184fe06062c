package msl

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CacheMaxEnv names the environment variable that caps the size of the
// compile cache (the directory CompileOptions.CacheDir, by default
// os.UserCacheDir()/puremetal/msl), in bytes or with a K, M or G suffix;
// "0" means no cap. The default is DefaultCacheMax.
const CacheMaxEnv = "PUREMETAL_EMU_CACHE_MAX"

// DefaultCacheMax is the default cap of the compile cache: 4 GiB.
const DefaultCacheMax = 4 << 30

// cacheKeep is how long a cache file is kept after its last use whatever
// the cap, so that a library another process has just built is not removed
// before it loads it.
const cacheKeep = 10 * time.Minute

// cacheMax returns the cap of the compile cache, 0 for none.
func cacheMax() (int64, error) {
	s := strings.TrimSpace(os.Getenv(CacheMaxEnv))
	if s == "" {
		return DefaultCacheMax, nil
	}
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("msl: %s=%q is not a size in bytes (or with K, M or G)", CacheMaxEnv, os.Getenv(CacheMaxEnv))
	}
	return n * mult, nil
}

// touch marks a cache file as used now, so that pruning removes the
// libraries used least recently first.
func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

var pruneMu sync.Mutex

// pruneCache removes the least recently used libraries, translations and
// preprocessed sources under root (lib/ and pp/) while they hold more than
// the cap, never one used in the last cacheKeep. It returns the bytes it
// removed.
func pruneCache(root string, max int64) (int64, error) {
	if max <= 0 {
		return 0, nil
	}
	pruneMu.Lock()
	defer pruneMu.Unlock()
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var files []entry
	var total int64
	for _, sub := range []string{"lib", "pp"} {
		_ = filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			files = append(files, entry{p, info.Size(), info.ModTime()})
			total += info.Size()
			return nil
		})
	}
	if total <= max {
		return 0, nil
	}
	sort.Slice(files, func(a, b int) bool { return files[a].used.Before(files[b].used) })
	var removed int64
	limit := time.Now().Add(-cacheKeep)
	for _, f := range files {
		if total-removed <= max*8/10 || f.used.After(limit) {
			break
		}
		if err := os.Remove(f.path); err == nil {
			removed += f.size
		}
	}
	return removed, nil
}

var lastPrune time.Time

// maybePrune prunes the cache after a build, at most once a minute.
func maybePrune(root string) {
	pruneMu.Lock()
	due := time.Since(lastPrune) > time.Minute
	if due {
		lastPrune = time.Now()
	}
	pruneMu.Unlock()
	if !due {
		return
	}
	if max, err := cacheMax(); err == nil {
		_, _ = pruneCache(root, max)
	}
}
