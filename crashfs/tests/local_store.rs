//! `spool drain --to file://...` and a relay with a `file://` upstream write through
//! `object_store`'s local file system, which does not fsync: an object the drain
//! was told is written (and whose spool entry it then removed) could vanish at a
//! power loss. `spool::connect` makes those writes durable; these runs cut the power
//! right after the writes and look for every object.

#![cfg(feature = "fuse")]

mod common;

use bytes::Bytes;
use common::*;
use object_store::ObjectStoreExt as _;
use object_store::path::Path as StorePath;

#[test]
fn objects_written_through_a_file_url_survive_a_power_loss() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for seed in 0..12 {
        let Some(fx) = Fixture::new("objects_written_through_a_file_url_survive", seed) else {
            return;
        };
        let root = fx.path("objects");
        let url = format!("file://{}", root.display());
        let names: Vec<String> = (0..8)
            .map(|i| format!("dir {i}/sub/object {i}.bin"))
            .collect();
        runtime.block_on(async {
            let store = spool::connect::store_from_url(&url, None).unwrap();
            for (i, name) in names.iter().enumerate() {
                let path = StorePath::parse(name).unwrap();
                store
                    .put(&path, Bytes::from(vec![i as u8; 5000]).into())
                    .await
                    .unwrap();
            }
        });
        fx.mount.power_loss_with_seed(seed).unwrap();
        for (i, name) in names.iter().enumerate() {
            let file = root.join(name);
            let data = std::fs::read(&file)
                .unwrap_or_else(|e| panic!("seed {seed}: {name} lost at a power loss: {e}"));
            assert!(
                data == vec![i as u8; 5000],
                "seed {seed}: {name} came back damaged"
            );
        }
    }
}
