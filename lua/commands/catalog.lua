-- catalog.sync, catalog.list, catalog.sources, catalog.remove: the flow files of each scheduler
-- service's folder, scheduled or not, so `flows ui` lists and starts any of them from any machine
-- (ours).
--
--   catalog.sync     source, digest, folder, files JSON  -> 'synced' | 'unchanged'
--       files: an object {path within the folder: the file's text}; replaces what `source`
--       published before, in this one call (an empty object forgets the source). `digest`
--       names the content (the caller's: the same digest again is 'unchanged', nothing
--       written); `folder` is where the folder is on the service's machine (kept for the runs'
--       records).
--   catalog.list     -> JSON list [{source, folder, path, text}], by source and path (read-only)
--   catalog.sources  -> JSON list [{source, folder, files, synced, seen}], by source (read-only):
--       `synced` when its content was last published, `seen` (absent until then) when a service
--       of the source last left the services' health list (stopped: scheduler.forget; silent
--       past max-worker-age: pruned by a ping), commands/schedulers.lua. Whether a source is
--       live is the caller's to say, from `schedulers` (scheduler/service/catalog.py).
--   catalog.remove   source  -> 'removed': forgets what `source` published (a service retired,
--       moved or renamed leaves its folder here otherwise); NOTFOUND when it published nothing
--
-- At most 10,000 files per source and 1 MiB per file; 64 MiB per call.
-- Keys: `P catalog` (hash: source -> JSON {digest, folder, files, synced, seen}) and
-- `P catalog:<source>` (hash: path -> text), include/keys.lua.
-- Errors: INVALID, TOOLARGE, NOTFOUND (catalog.remove).
-- @include args

api['catalog.sync'] = function(args)
  local cmd = 'CatalogSync'
  local source = Arg.id(cmd, 'source', args[1])
  local digest = Arg.id(cmd, 'digest', args[2])
  local folder = args[3]
  if type(folder) ~= 'string' or #folder > 4096 then
    Arg.fail(cmd, 'Arg "folder" must be a text of at most 4096 bytes')
  end
  local _, files = Arg.json(cmd, 'files', args[4], 'object', 67108864)
  if args[5] ~= nil then Arg.fail(cmd, 'too many arguments') end
  local paths = {}
  for path, text in pairs(files) do
    if type(path) ~= 'string' or path == '' or #path > 4096 then
      Arg.fail(cmd, 'Arg "files": a path must be a text of 1 to 4096 bytes')
    end
    if type(text) ~= 'string' then Arg.fail(cmd, 'Arg "files": ' .. path .. ' is not a text') end
    if #text > 1048576 then
      Err.raise('TOOLARGE', cmd .. '(): ' .. path .. ' has ' .. #text .. ' bytes, more than ' ..
        1048576)
    end
    table.insert(paths, path)
  end
  if #paths > 10000 then
    Err.raise('TOOLARGE', cmd .. '(): ' .. #paths .. ' files, more than ' .. 10000)
  end
  local held = redis.call('hget', Keys.catalog(), source)
  if held and cjson.decode(held).digest == digest then return 'unchanged' end
  redis.call('del', Keys.catalog_files(source))
  if #paths == 0 then
    redis.call('hdel', Keys.catalog(), source)
    return 'synced'
  end
  table.sort(paths)
  local pairs_list = {}
  for _, path in ipairs(paths) do
    table.insert(pairs_list, path)
    table.insert(pairs_list, files[path])
  end
  Engine.call_many('hset', Keys.catalog_files(source), pairs_list)
  redis.call('hset', Keys.catalog(), source, cjson.encode({ digest = digest, folder = folder,
    files = #paths, synced = Engine.now }))
  return 'synced'
end

api['catalog.list'] = function(args)
  if args[1] ~= nil then Arg.fail('CatalogList', 'too many arguments') end
  local sources = redis.call('hkeys', Keys.catalog())
  table.sort(sources)
  local out = {}
  for _, source in ipairs(sources) do
    local meta = cjson.decode(redis.call('hget', Keys.catalog(), source))
    local raw = redis.call('hgetall', Keys.catalog_files(source))
    local entries = {}
    for i = 1, #raw, 2 do table.insert(entries, { raw[i], raw[i + 1] }) end
    table.sort(entries, function(a, b) return a[1] < b[1] end)
    for _, entry in ipairs(entries) do
      table.insert(out, { source = source, folder = meta.folder, path = entry[1], text = entry[2] })
    end
  end
  if #out == 0 then return '[]' end
  return cjson.encode(out)
end

api['catalog.sources'] = function(args)
  if args[1] ~= nil then Arg.fail('CatalogSources', 'too many arguments') end
  local raw = redis.call('hgetall', Keys.catalog())
  local out = {}
  for i = 1, #raw, 2 do
    local meta = cjson.decode(raw[i + 1])
    table.insert(out, { source = raw[i], folder = meta.folder, files = meta.files,
      synced = meta.synced, seen = meta.seen })
  end
  if #out == 0 then return '[]' end
  table.sort(out, function(a, b) return a.source < b.source end)
  return cjson.encode(out)
end

api['catalog.remove'] = function(args)
  local cmd = 'CatalogRemove'
  local source = Arg.id(cmd, 'source', args[1])
  if args[2] ~= nil then Arg.fail(cmd, 'too many arguments') end
  if redis.call('hexists', Keys.catalog(), source) == 0 then
    Err.raise('NOTFOUND', cmd .. '(): no source ' .. source .. ' has published flow files')
  end
  redis.call('del', Keys.catalog_files(source))
  redis.call('hdel', Keys.catalog(), source)
  return 'removed'
end
