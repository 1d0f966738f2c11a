/* Shared JSON fixtures for the object tests. */
#ifndef KCR_TEST_OBJECT_FIXTURES_H
#define KCR_TEST_OBJECT_FIXTURES_H

#include <string.h>

#include "kcr/object.h"

static const char POD_JSON[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-0\",\"namespace\":"
    "\"default\",\"uid\":\"1111-2222\",\"resourceVersion\":\"4711\",\"generation\":3,"
    "\"labels\":{\"app\":\"web\",\"app.kubernetes.io/name\":\"frontend\"},\"annotations\":{"
    "\"note\":\"hello \\\"world\\\"\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
    "\"ReplicaSet\",\"name\":\"web-abc\",\"uid\":\"rs-1\",\"controller\":true,"
    "\"blockOwnerDeletion\":true},{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"cm\","
    "\"uid\":\"cm-1\"}],\"finalizers\":[\"example.com/cleanup\"],\"deletionTimestamp\":"
    "\"2024-01-02T03:04:05Z\",\"managedFields\":[{\"manager\":\"kubectl\",\"operation\":"
    "\"Update\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{}}}}}]},"
    "\"spec\":{\"replicas\":2,\"ratio\":0.25,\"big\":12345678901234,\"huge\":"
    "123456789012345678901234567890,\"neg\":-7,\"on\":true,\"off\":false,\"nothing\":null,"
    "\"empty\":\"\",\"emptyMap\":{},\"emptyList\":[],\"containers\":[{\"name\":\"c\",\"image\":"
    "\"nginx\",\"ports\":[{\"containerPort\":80}]}]},\"status\":{\"conditions\":[{\"type\":"
    "\"Ready\",\"status\":\"True\"},{\"type\":\"Scheduled\",\"status\":\"True\"}]}}";

static inline kcr_object *parse_str(const char *json)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_object_parse(json, strlen(json), &o);
    return err == KCR_OK ? o : NULL;
}

#endif
