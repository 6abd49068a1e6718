-- tag: tags on jobs.
--
--   tag 'add', jid, tag...          -> JSON list of the job's tags
--   tag 'remove', jid, tag...       -> JSON list of the job's tags
--   tag 'get', tag, [offset=0, count=25] -> JSON {total, jobs: [jid...]} (oldest tagging first;
--                                    an entry an outside writer left that is no jid is skipped,
--                                    Arg.jids_in, so a page may hold fewer)
--   tag 'top', [offset=0, count=25] -> JSON list of tags used by at least two jobs, most used first
--
-- Errors: INVALID, NOTFOUND, TOOLARGE.
-- @include args
-- @include job
-- @include dialect

local function tag_edit(cmd, args, adding)
  local jid = Arg.jid(cmd, 'jid', args[2])
  local tags = {}
  for i = 3, #args do table.insert(tags, Arg.id(cmd, 'tag', args[i])) end
  local current = Job.get(jid, 'tags')
  if not current then Err.raise('NOTFOUND', cmd .. '(): Job ' .. jid .. ' does not exist') end
  local old = Job.decode_list(current)
  local new = Job.merge_tags(old, tags, adding)
  if #new > Arg.MAX_TAGS then
    Err.raise('TOOLARGE', cmd .. '(): a job may have at most ' .. Arg.MAX_TAGS .. ' tags')
  end
  Job.retag(jid, old, new)
  local encoded = #new == 0 and '[]' or cjson.encode(new)
  redis.call('hset', Keys.job(jid), 'tags', encoded, 'updated', Engine.now)
  return encoded
end

api['tag'] = function(args)
  local cmd = 'Tag'
  local verb = Arg.present(cmd, 'verb', args[1])
  if verb == 'add' then return tag_edit(cmd, args, true) end
  if verb == 'remove' then return tag_edit(cmd, args, false) end
  if verb == 'get' then
    local tag = Arg.id(cmd, 'tag', args[2])
    local offset = Arg.optional_integer(cmd, 'offset', args[3], 0, 0, Engine.MAX_OFFSET)
    local count = Arg.optional_integer(cmd, 'count', args[4], 25, 0, Engine.MAX_COUNT)
    local jobs = {}
    if count > 0 or Dialect.rules.zero_count_reads_all then
      jobs = Arg.jids_in(redis.call('zrange', Keys.tag(tag), offset, offset + count - 1))
    end
    local encoded = cjson.encode({ total = redis.call('zcard', Keys.tag(tag)), jobs = jobs })
    if #jobs == 0 then encoded = string.gsub(encoded, '"jobs":{}', '"jobs":[]') end
    return encoded
  end
  if verb == 'top' then
    local offset = Arg.optional_integer(cmd, 'offset', args[2], 0, 0, Engine.MAX_OFFSET)
    local count = Arg.optional_integer(cmd, 'count', args[3], 25, 0, Engine.MAX_COUNT)
    if count == 0 then return '[]' end
    local tags = redis.call('zrevrangebyscore', Keys.tags(), '+inf', 2, 'LIMIT', offset, count)
    if #tags == 0 then return '[]' end
    return cjson.encode(tags)
  end
  Arg.fail(cmd, 'Arg "verb" must be one of add, remove, get, top: ' .. Arg.shown(verb))
end
