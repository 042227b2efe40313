package protocol

import (
	"crypto/rand"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// NewID returns an id of the reference server's shape (wire contract §6,
// response_start, and §11.4): prefix_<epoch ms of now>_<digits random
// base-36 digits, zero padded>: resp_<ms>_<6> for responses, conn_<ms>_<8>
// and sub_<ms>_<8> for connections and subscriptions.
func NewID(prefix string, digits int, now time.Time) string {
	limit := int64(1) // 36^digits; digits is at most 12
	for range digits {
		limit *= 36
	}
	n, err := rand.Int(rand.Reader, big.NewInt(limit))
	if err != nil {
		panic(err)
	}
	s := strconv.FormatInt(n.Int64(), 36)
	return prefix + "_" + strconv.FormatInt(now.UnixMilli(), 10) + "_" + strings.Repeat("0", digits-len(s)) + s
}
