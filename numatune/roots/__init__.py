"""What a saved root is made of, under `numatune.host.Host`: an archive read into memory (`tarindex`)
and a directory opened beneath one handle (`rootdir`). Stdlib only; nothing here imports a reader."""
