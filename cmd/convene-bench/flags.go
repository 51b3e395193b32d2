package main

import (
	"fmt"
	"strconv"
	"strings"
)

// positiveInts parses a comma-separated list of positive integers.
func positiveInts(list string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// nonEmpty is s as a list: none when s is empty.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
