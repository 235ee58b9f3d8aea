// The Go client's natural uploads, for clients/tools/run.py: an ObjectHandle's
// Writer (io.Copy of the file) for every file of a tree. Its chunk is 16 MiB, so a
// larger file is a resumable upload in chunks sent with X-Guploader-No-308. Built
// from Debian's golang-google-cloud-dev (GOPATH mode, no network). Prints one JSON
// line: {"uploaded": {name: size}}.
//
//	go_tool ENDPOINT BUCKET PREFIX TREE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: go_tool ENDPOINT BUCKET PREFIX TREE")
		os.Exit(2)
	}
	endpoint, bucket, prefix, root := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	ctx := context.Background()
	client, err := storage.NewClient(ctx,
		option.WithEndpoint(endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		fail("the client", err)
	}
	var files []string
	err = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		fail("walking the tree", err)
	}
	sort.Strings(files)
	uploaded := map[string]int64{}
	for _, rel := range files {
		name := prefix + "tree/" + rel
		size, err := upload(ctx, client.Bucket(bucket).Object(name), filepath.Join(root, rel))
		if err != nil {
			fail(name, err)
		}
		uploaded[name] = size
	}
	out, _ := json.Marshal(map[string]interface{}{"uploaded": uploaded})
	fmt.Println(string(out))
}

func upload(ctx context.Context, object *storage.ObjectHandle, path string) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	writer := object.NewWriter(ctx)
	size, err := io.Copy(writer, file)
	if err != nil {
		writer.Close()
		return 0, err
	}
	return size, writer.Close()
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}
