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
// base-36 digits>,
// e.g. resp_<ms>_<6> for response ids, conn_<ms>_<8> and sub_<ms>_<8> for
// connections and subscriptions.
func NewID(prefix string, digits int, now time.Time) string {
	n, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(36), big.NewInt(int64(digits)), nil))
	if err != nil {
		panic(err)
	}
	s := n.Text(36)
	return prefix + "_" + strconv.FormatInt(now.UnixMilli(), 10) + "_" + strings.Repeat("0", digits-len(s)) + s
}
