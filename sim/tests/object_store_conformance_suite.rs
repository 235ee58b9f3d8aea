//! `object_store`'s own backend test suite (its `integration` module, the one it runs
//! against real Cloud Storage) against the fake on a real port. The functions listed
//! are those the fake supports. Left out, because the fake does not serve them:
//! `rename_and_copy`/`copy_if_not_exists` (server-side copy), `stream_get` and
//! `multipart*` (XML multipart uploads), `get_opts` (`If-Modified-Since` and reads of
//! superseded generations), `put_get_attributes` (custom metadata).

mod common;

use common::{BUCKET, config, gcs_store_http, real_fake};
use fake_gcs::FaultPlan;
use object_store::integration::*;

#[tokio::test]
async fn object_stores_own_suite_passes_against_the_fake() {
    let (_fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let store = gcs_store_http(&base, BUCKET).unwrap();
    put_get_delete_list(&store).await;
    list_with_offset_exclusivity(&store).await;
    list_uses_directories_correctly(&store).await;
    list_with_delimiter(&store).await;
    get_nonexistent_object(&store, None).await.unwrap_err();
    put_opts(&store, true).await;
}
